"""Token embedding scaled by sqrt(d_model) plus positions (Vaswani et al., 2017)."""

import math

import keras
from keras import ops

from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.layers.sinusoidal_position_encoding import sinusoidal_table
from keras_attention.layers.validation import check_token_ids, refuse_positional, require_keywords, static_int


@keras.saving.register_keras_serializable(package="keras_attention")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding times sqrt(d_model), plus a sinusoidal or learned position.

    The input layer of the Transformer of "Attention Is All You Need"
    (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762), sections 3.4 and
    3.5: the paper multiplies the embedding weights by sqrt(d_model), which
    puts the token signal on the same scale as the unit-amplitude sinusoids,
    then adds the position encoding. `position="learned"` uses a trained table
    instead (the paper's variant in table 3, row E, which scored nearly the
    same); it cannot go past `max_length`.

    With `mask_zero=True`, id 0 is padding: the layer emits a Keras mask
    `ids != 0`, which the attention layers downstream pick up.

    Args:
        vocab_size: int. Number of token ids.
        d_model: int. Embedding size.
        max_length: int. Longest sequence, for both kinds of positions: a
            longer input (or `start_index` past it) raises a ValueError where
            the length is known when the call is traced. Defaults to 512.
        position: `"sinusoidal"` or `"learned"`. Defaults to `"sinusoidal"`.
        scale: bool. Multiply token embeddings by sqrt(d_model). Defaults to True.
        mask_zero: bool. Treat id 0 as padding and emit a mask. Defaults to False.
        embeddings_initializer: initializer of the token table. Defaults to
            `"uniform"` (Keras' `Embedding` default).
        **kwargs: standard layer arguments.

    The arguments are keywords only: keras-hub's `TokenAndPositionEmbedding`
    takes `(vocabulary_size, sequence_length, embedding_dim)` by position.

    Call arguments:
        inputs: int tensor `(B, T)` of token ids (a float tensor is refused).
        start_index: int or scalar int tensor: position of the first token,
            for step-by-step decoding. Defaults to 0.

    Returns:
        `(B, T, d_model)` float tensor, with a `(B, T)` mask if `mask_zero`.

    Example:

    >>> layer = PositionalEmbedding(vocab_size=100, d_model=16, mask_zero=True)
    >>> ids = keras.ops.convert_to_tensor([[5, 9, 2, 0, 0]])
    >>> tuple(layer(ids).shape), keras.ops.convert_to_numpy(layer.compute_mask(ids)).tolist()
    ((1, 5, 16), [[True, True, True, False, False]])
    """

    def __init__(
        self,
        *args,
        vocab_size=None,
        d_model=None,
        max_length=512,
        position="sinusoidal",
        scale=True,
        mask_zero=False,
        embeddings_initializer="uniform",
        **kwargs,
    ):
        # keras-hub's embeddings take (vocabulary_size, sequence_length, ...): keywords only, no mix-up.
        refuse_positional("PositionalEmbedding", args, ("vocab_size", "d_model"))
        require_keywords("PositionalEmbedding", vocab_size=vocab_size, d_model=d_model)
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.d_model = check_positive_int("d_model", d_model)
        self.max_length = check_positive_int("max_length", max_length)
        self.position = check_choice("position", position, ("sinusoidal", "learned"))
        self.scale = bool(scale)
        self.mask_zero = bool(mask_zero)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.token_embedding = keras.layers.Embedding(
            self.vocab_size,
            self.d_model,
            embeddings_initializer=self.embeddings_initializer,
            mask_zero=mask_zero,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.supports_masking = self.mask_zero

    def build(self, inputs_shape):
        self.token_embedding.build(inputs_shape)
        self.position_embeddings = None
        if self.position == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, self.d_model),
                initializer="glorot_uniform",
            )
        self.built = True

    def call(self, inputs, start_index=0):
        check_token_ids("inputs", inputs)
        length, start = inputs.shape[-1], static_int(start_index)
        if length is not None and start is not None and start + length > self.max_length:
            raise ValueError(
                f"`start_index` + the sequence's length must be at most `max_length`={self.max_length}. "
                f"Received: inputs.shape={tuple(inputs.shape)}, start_index={start}"
            )
        x = self.token_embedding(inputs)  # (B, T, d)
        if self.scale:
            x = x * ops.cast(math.sqrt(self.d_model), x.dtype)
        length = ops.shape(inputs)[-1]
        if self.position == "learned":
            table = ops.convert_to_tensor(self.position_embeddings)  # (max_length, d)
            positions = ops.slice(table, [start_index, 0], [length, self.d_model])  # (T, d)
            positions = ops.cast(positions, x.dtype)
        else:
            positions = sinusoidal_table(length, self.d_model, start_index, dtype=x.dtype)
        return x + positions  # (B, T, d) + (T, d)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "max_length": self.max_length,
                "position": self.position,
                "scale": self.scale,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
