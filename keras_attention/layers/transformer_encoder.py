"""One Transformer encoder block (Vaswani et al., 2017, section 3.1)."""

import keras

from keras_attention.layers.transformer_block import TransformerBlock, keras_mask_of
from keras_attention.layers.validation import check_mask


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoder(TransformerBlock):
    """Self-attention then a feed-forward network, each with residual and norm.

    One of the N identical encoder layers of "Attention Is All You Need"
    (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762), section 3.1: a
    multi-head self-attention sublayer, in which every position attends to all
    positions of the same sequence, and a position-wise feed-forward sublayer.
    Each sublayer is wrapped as LayerNorm(x + Dropout(Sublayer(x))) (post-norm,
    the paper's form), or as x + Dropout(Sublayer(LayerNorm(x))) with
    `normalize_first=True` (pre-norm; a stack of pre-norm blocks usually ends
    with one more LayerNormalization, which the models add).

    Padded positions are excluded as keys: pass `padding_mask`, or feed a
    tensor that carries a Keras mask (e.g. from `PositionalEmbedding` with
    `mask_zero=True`). The output keeps the input's mask.

    Args (keywords only, as keras-hub's `TransformerEncoder` takes
    `intermediate_dim` first):
        num_heads: int. Number of attention heads; must divide d_model.
        intermediate_dim: int. Hidden size of the feed-forward network (d_ff).
        dropout: float. Dropout on each sublayer's output before the residual
            sum (the paper's P_drop). Defaults to 0.
        attention_dropout: float. Dropout on the attention weights. Defaults to 0.
        activation: activation of the feed-forward network. Defaults to "relu".
        layer_norm_epsilon: float. Defaults to 1e-5.
        normalize_first: bool. Pre-norm instead of post-norm. Defaults to False.
        kernel_initializer: for all dense projections' kernels.
        bias_initializer: for all dense projections' biases.
            Default to "glorot_uniform" and "zeros".
        attention_kernel_initializer: for the attention projections' kernels
            (query, key, value, output), if they should start differently
            from `kernel_initializer`. Defaults to None (`kernel_initializer`).
        **kwargs: standard layer arguments.

    Call arguments:
        inputs: `(B, T, d_model)`.
        padding_mask: boolean `(B, T)`, True at real tokens. Defaults to the
            input's Keras mask.
        attention_mask: boolean `(B, T, T)`, True where attention is allowed.
        return_attention_scores: bool. Also return the self-attention weights
            `(B, num_heads, T, T)`.
        training: bool.

    Returns:
        `(B, T, d_model)`, or `(outputs, scores)` with `return_attention_scores`.

    Example:

    >>> x = keras.random.normal((2, 7, 16))
    >>> tuple(TransformerEncoder(num_heads=4, intermediate_dim=32)(x).shape)
    (2, 7, 16)
    """

    def build(self, inputs_shape):
        d_model = self._check_model_dim(inputs_shape, "inputs")
        self.self_attention = self._make_attention(
            "self_attention", d_model, inputs_shape, inputs_shape
        )
        self.self_attention_norm = self._make_norm("self_attention_norm", inputs_shape)
        self._build_feedforward(inputs_shape)
        self.built = True

    def compute_output_spec(self, inputs, padding_mask=None, attention_mask=None, return_attention_scores=False,
                            training=None):
        return self._output_spec(inputs, inputs.shape[1], return_attention_scores)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
    ):
        batch, length = inputs.shape[0], inputs.shape[1]
        check_mask("padding_mask", padding_mask, (batch, length))
        check_mask("attention_mask", attention_mask, (batch, length, length), broadcast=True)
        if padding_mask is None:
            padding_mask = keras_mask_of(inputs)

        # Self-attention sublayer.
        x = self._pre(inputs, self.self_attention_norm)
        x = self.self_attention(
            x,
            x,
            value_mask=padding_mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        x, scores = x if return_attention_scores else (x, None)  # (B, T, d), (B, N, T, T)
        x = self._post(x, inputs, self.self_attention_norm, training)

        # Feed-forward sublayer.
        x = self._feedforward_sublayer(x, training)
        return (x, scores) if return_attention_scores else x
