"""The encoder-decoder Transformer (Vaswani et al., 2017)."""

import keras
from keras import ops

from keras_attention.base.validation import check_choice, check_positive_int, check_rate
from keras_attention.layers import PositionalEmbedding, TransformerDecoder, TransformerEncoder
from keras_attention.models.initializers import headwise_glorot_uniform
from keras_attention.models.optimizer_build import BuildsOptimizerBeforeTracing
from keras_attention.models.transformer_decoding import TransformerDecoding

PRESETS = {
    # A model that trains in minutes on a CPU; for tests and demos.
    "tiny": dict(num_layers=2, d_model=128, num_heads=4, intermediate_dim=512, dropout=0.1),
    # The Multi30k-sized model (3+3 layers, d_model 256).
    "small": dict(num_layers=3, d_model=256, num_heads=4, intermediate_dim=1024, dropout=0.1),
    # The paper's base and big models (table 3).
    "base": dict(num_layers=6, d_model=512, num_heads=8, intermediate_dim=2048, dropout=0.1),
    "big": dict(num_layers=6, d_model=1024, num_heads=16, intermediate_dim=4096, dropout=0.3),
}
"""`Transformer.from_preset`'s sizes by name: "tiny", "small", "base" and "big" (the last two the paper's)."""


@keras.saving.register_keras_serializable(package="keras_attention")
class Transformer(TransformerDecoding, BuildsOptimizerBeforeTracing, keras.Model):
    """Encoder-decoder Transformer for translation, from "Attention Is All You Need".

    Vaswani et al. (2017, https://arxiv.org/abs/1706.03762): a stack of
    `TransformerEncoder` blocks reads the source, a stack of
    `TransformerDecoder` blocks reads the target prefix with causal
    self-attention and attends to the encoder output; a linear layer and a
    softmax give the next-token distribution. Embeddings are scaled by
    sqrt(d_model) and summed with positions (`PositionalEmbedding`), with
    dropout on the sums. As in section 3.4, the output projection shares its
    weights with the target embedding (`tie_output=True`), and with one joint
    vocabulary the source embedding can be shared too (`share_embeddings`).

    Named presets: `Transformer.from_preset("base", ...)` (6+6 layers, d_model
    512, 8 heads, d_ff 2048, dropout 0.1) and `"big"` are the paper's; `"small"`
    (3+3, 256) and `"tiny"` (2+2, 128) fit a CPU.

    Token id 0 is padding in both languages.

    Args:
        source_vocab_size: int. Source vocabulary size.
        target_vocab_size: int. Target vocabulary size.
        num_layers: int. Encoder and decoder blocks each. Defaults to 6.
        d_model: int. Model width. Defaults to 512.
        num_heads: int. Attention heads. Defaults to 8.
        intermediate_dim: int. Feed-forward width d_ff. Defaults to 2048.
        dropout: float. Residual and embedding dropout. Defaults to 0.1.
        attention_dropout: float. Dropout on attention weights. Defaults to 0.
        max_length: int. Longest source or target sequence. Defaults to 256.
        position: "sinusoidal" or "learned". Defaults to "sinusoidal".
        normalize_first: bool. Pre-norm blocks, plus a final layer norm on
            each stack. Defaults to False (post-norm, the paper's).
        share_embeddings: bool. One embedding for source and target (needs
            equal vocabulary sizes). Defaults to False.
        tie_output: bool. Output projection = target embedding transposed.
            Defaults to True.
        activation: feed-forward activation. Defaults to "relu".
        attention_kernel_initializer: how the attention projections' kernels
            start. Defaults to None: `headwise_glorot_uniform()` (see there),
            smaller than Keras' Glorot; on Multi30k it learns faster. Any
            Keras initializer, for example "glorot_uniform", replaces it.
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: `(source_ids, target_in)`, int `(B, S)` and `(B, T)`;
            `target_in` is the target shifted right (starts with [START]).
        training: bool.

    Returns:
        float32 logits `(B, T, target_vocab_size)` (teacher forcing).

    Example:

    >>> model = Transformer.from_preset("tiny", source_vocab_size=100, target_vocab_size=120)
    >>> source = keras.ops.ones((2, 7), "int32"); target_in = keras.ops.ones((2, 5), "int32")
    >>> tuple(model((source, target_in)).shape)
    (2, 5, 120)
    """

    def __init__(
        self,
        source_vocab_size,
        target_vocab_size,
        num_layers=6,
        d_model=512,
        num_heads=8,
        intermediate_dim=2048,
        dropout=0.1,
        attention_dropout=0.0,
        max_length=256,
        position="sinusoidal",
        normalize_first=False,
        share_embeddings=False,
        tie_output=True,
        activation="relu",
        attention_kernel_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.source_vocab_size = check_positive_int("source_vocab_size", source_vocab_size)
        self.target_vocab_size = check_positive_int("target_vocab_size", target_vocab_size)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(
                "`d_model` must be divisible by `num_heads`. "
                f"Received: d_model={d_model}, num_heads={num_heads}"
            )
        self.intermediate_dim = check_positive_int("intermediate_dim", intermediate_dim)
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout = check_rate("attention_dropout", attention_dropout)
        self.max_length = check_positive_int("max_length", max_length)
        self.position = check_choice("position", position, ("sinusoidal", "learned"))
        self.normalize_first = bool(normalize_first)
        self.share_embeddings = bool(share_embeddings)
        if share_embeddings and source_vocab_size != target_vocab_size:
            raise ValueError(
                "`share_embeddings=True` needs one vocabulary. Received: "
                f"source_vocab_size={source_vocab_size}, target_vocab_size={target_vocab_size}"
            )
        self.tie_output = bool(tie_output)
        self.activation = activation
        self.attention_kernel_initializer = keras.initializers.get(
            headwise_glorot_uniform() if attention_kernel_initializer is None else attention_kernel_initializer
        )

        def embedding(vocab_size, name):
            return PositionalEmbedding(
                vocab_size=vocab_size,
                d_model=d_model,
                max_length=max_length,
                position=position,
                mask_zero=True,
                embeddings_initializer=keras.initializers.RandomNormal(stddev=d_model**-0.5),
                dtype=self.dtype_policy,
                name=name,
            )

        block_kwargs = dict(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation=activation,
            normalize_first=normalize_first,
            attention_kernel_initializer=self.attention_kernel_initializer,
            dtype=self.dtype_policy,
        )
        self.target_embedding = embedding(target_vocab_size, "target_embedding")
        self.source_embedding = (
            self.target_embedding if share_embeddings else embedding(source_vocab_size, "source_embedding")
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.encoder_blocks = [
            TransformerEncoder(**block_kwargs, name=f"encoder_{i}") for i in range(num_layers)
        ]
        self.decoder_blocks = [
            TransformerDecoder(**block_kwargs, name=f"decoder_{i}") for i in range(num_layers)
        ]
        self.encoder_norm = self.decoder_norm = None
        if normalize_first:
            self.encoder_norm = keras.layers.LayerNormalization(
                epsilon=1e-5, dtype=self.dtype_policy, name="encoder_norm"
            )
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=1e-5, dtype=self.dtype_policy, name="decoder_norm"
            )
        self.output_projection = None
        if not tie_output:
            self.output_projection = keras.layers.Dense(
                target_vocab_size, dtype=self.dtype_policy, name="output_projection"
            )

    @classmethod
    def from_preset(cls, preset, source_vocab_size, target_vocab_size, **overrides):
        """A model of a named size: "tiny", "small", "base" or "big"."""
        check_choice("preset", preset, tuple(PRESETS))
        return cls(source_vocab_size, target_vocab_size, **{**PRESETS[preset], **overrides})

    # Full passes (training, scoring) -------------------------------------------

    def encode(self, source_ids, training=None):
        """Source ids `(B, S)` -> encoder output `(B, S, d_model)` and mask `(B, S)`."""
        source_mask = ops.not_equal(source_ids, 0)
        x = self.embedding_dropout(self.source_embedding(source_ids), training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=source_mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, source_mask

    def _logits(self, x):
        if self.output_projection is not None:
            logits = self.output_projection(x)
        else:
            with keras.name_scope("output_projection"):  # the tied product's ops, named as the layer's are
                logits = ops.matmul(x, ops.transpose(ops.cast(self._tied_table(), x.dtype)))  # (B, T, V)
        return ops.cast(logits, "float32")

    def _tied_table(self):
        """The target embedding's `(V, d)` table, which the tied output projection multiplies by: its
        weights, or once `Model.quantize` has stored them in int8 or int4, the rows as its call de-quantizes
        them (a float product, then: only the weights are stored quantized)."""
        embedding = self.target_embedding.token_embedding
        if embedding.quantization_mode is None:
            return embedding.embeddings
        return embedding(ops.arange(embedding.input_dim))  # (V, d)

    def decode(self, target_in, encoder_output, source_mask, training=None, return_attention=False):
        """Teacher-forced decoder pass: logits `(B, T, V)` (and the last block's
        cross-attention `(B, heads, T, S)` if `return_attention`)."""
        target_mask = ops.not_equal(target_in, 0)
        x = self.embedding_dropout(self.target_embedding(target_in), training=training)
        scores = None
        for block in self.decoder_blocks:
            x, scores = block(
                x,
                encoder_output,
                decoder_padding_mask=target_mask,
                encoder_padding_mask=source_mask,
                return_attention_scores=True,
                training=training,
            )
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        logits = self._logits(x)
        return (logits, scores) if return_attention else logits

    def call(self, inputs, training=None):
        source_ids, target_in = inputs
        encoder_output, source_mask = self.encode(source_ids, training=training)
        return self.decode(target_in, encoder_output, source_mask, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "source_vocab_size": self.source_vocab_size,
                "target_vocab_size": self.target_vocab_size,
                "num_layers": self.num_layers,
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "max_length": self.max_length,
                "position": self.position,
                "normalize_first": self.normalize_first,
                "share_embeddings": self.share_embeddings,
                "tie_output": self.tie_output,
                "activation": self.activation,
                "attention_kernel_initializer": keras.initializers.serialize(self.attention_kernel_initializer),
            }
        )
        return config
