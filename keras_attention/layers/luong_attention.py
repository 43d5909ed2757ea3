"""Multiplicative and local attention (Luong, Pham and Manning, 2015, section 3)."""

import keras
from keras import ops

from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.layers import attention_ops
from keras_attention.layers.alignment_attention import AlignmentAttention
from keras_attention.layers.validation import check_attention_shapes

SCORES = ("dot", "general", "concat")


@keras.saving.register_keras_serializable(package="keras_attention")
class LuongAttention(AlignmentAttention):
    """Luong attention: global with three score functions, or local-p.

    Implements "Effective Approaches to Attention-based Neural Machine
    Translation" (Luong, Pham and Manning, 2015, https://arxiv.org/abs/1508.04025),
    section 3. A query h_t (the decoder state) is scored against every key
    hbar_s (an encoder state) with one of the functions of equation (8):

    - `"dot"`: h_t^T hbar_s (query and key must have the same feature size);
    - `"general"`: h_t^T W_a hbar_s, W_a stored as `general_kernel` `(d_k, d_q)`;
    - `"concat"`: v_a^T tanh(W_a [h_t; hbar_s]), W_a stored as one
      `concat_kernel` `(d_q + d_k, units)` as in the paper. It is split into
      its query and key halves at call time (W_a [h; s] = W_q h + W_k s), so no
      `(B, T_q, T_v, d_q + d_k)` concatenation is ever built.

    `scaled=True` divides the "dot" and "general" scores by sqrt(d_q), as
    scaled dot-product attention does (Vaswani et al., 2017), an addition to
    the paper. A product of two d_q-vectors grows with d_q, and under Adam the
    d_k x d_q entries of W_a move together, so unscaled scores can soon
    saturate the softmax, and the model learns to ignore its attention
    (`scripts/ablations/ablate_luong_scale.py` compares the two on Multi30k).
    `scale=True` multiplies the scores by a learned scalar (initialised to 1),
    as `keras.layers.Attention(use_scale=True)` does.

    Global attention (`window=None`, section 3.1): weights a_t = softmax of the
    scores over the valid keys; context c_t = sum_s a_t(s) value_s.

    Local-p attention (`window=D`, section 3.2): the layer predicts an aligned
    position p_t = S * sigmoid(v_p^T tanh(W_p h_t)) (equation 9), where S is the
    example's source length: the number of True entries of `value_mask`, or T_v
    without a mask. Source positions are counted from 0, so p_t lies in
    [0, S]. The weights are the softmax of the scores over the positions s with
    |s - p_t| <= D (and not padded), multiplied by exp(-(s - p_t)^2 / (2 sigma^2))
    with sigma = D / 2 (equation 10). They are exactly zero outside the window
    and, as in the paper, do NOT sum to one: the Gaussian only down-weights.
    The Gaussian makes p_t (and so W_p, v_p) differentiable. S counting the True
    entries assumes the padding is at the end of each sequence.

    Decoding one step at a time: call with a rank-2 query `(B, d_q)`. The
    key-side work of the score (W_a hbar_s for "general", the key half of W_a
    for "concat") can be done once per source sequence with `project_keys(key)`
    and passed as `projected_keys`; the result is the same.

    Masking: `value_mask` (filled in from the value's Keras mask when not
    given) marks the valid keys; padded keys get exactly zero weight. It covers
    `key` too.

    Args:
        score: str. `"dot"`, `"general"` or `"concat"`. Defaults to `"dot"`.
        scaled: bool. Divide the "dot" or "general" scores by sqrt(d_q).
            Defaults to False (the paper's scores).
        scale: bool. Learn a scalar multiplier for the scores. Defaults to False.
        window: int. Half-width D of the local-p window; None for global
            attention. Defaults to None.
        units: int. Hidden size of the `"concat"` score and of the position
            network of local-p. Defaults to the query's feature size.
        kernel_initializer: initializer for the kernels and vectors. Defaults
            to `"glorot_uniform"`.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, d_q)` (one decoder step) or `(B, T_q, d_q)` (all steps).
        value: `(B, T_v, d_v)`.
        key: `(B, T_v, d_k)`. Defaults to `value`.
        value_mask: boolean `(B, T_v)`, True for valid keys.
        projected_keys: the output of `project_keys`, or None.
        return_attention_scores: bool. Also return the weights.
        training: bool. Unused (no dropout); accepted for uniformity.

    Returns:
        The context, `(B, d_v)` for a rank-2 query and `(B, T_q, d_v)` for a
        rank-3 one; with `return_attention_scores`, `(context, weights)` where
        the weights are `(B, T_v)` or `(B, T_q, T_v)`.

    Example:

    >>> layer = LuongAttention(score="general", window=2)
    >>> encoder_out = keras.random.normal((2, 9, 6))
    >>> decoder_out = keras.random.normal((2, 4, 6))
    >>> context, weights = layer(decoder_out, encoder_out, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 4, 6), (2, 4, 9))

    References:
        Luong, Pham, Manning (2015), https://arxiv.org/abs/1508.04025.
    """

    def __init__(
        self,
        score="dot",
        scaled=False,
        scale=False,
        window=None,
        units=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.score = check_choice("score", score, SCORES)
        if scaled and self.score == "concat":
            raise ValueError('`scaled=True` applies to the "dot" and "general" scores (the "concat" '
                             'score is bounded by its tanh). Received: scaled=True, score="concat"')
        self.scaled = bool(scaled)
        self.scale = bool(scale)
        self.window = None if window is None else check_positive_int("window", window)
        self.units = None if units is None else check_positive_int("units", units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        check_attention_shapes(query_shape, value_shape, key_shape)
        d_q, d_k = query_shape[-1], key_shape[-1]
        units = self.units or d_q
        if self.score == "dot" and d_q != d_k:
            raise ValueError(
                '`score="dot"` needs query and key of the same feature size. '
                f"Received: query.shape={tuple(query_shape)}, key.shape={tuple(key_shape)}"
            )

        def weight(name, shape, initializer=self.kernel_initializer):
            return self.add_weight(name=name, shape=shape, initializer=initializer)

        self.general_kernel = self.concat_kernel = self.score_vector = None
        if self.score == "general":
            self.general_kernel = weight("general_kernel", (d_k, d_q))
        elif self.score == "concat":
            self.concat_kernel = weight("concat_kernel", (d_q + d_k, units))
            self.score_vector = weight("score_vector", (units,))
        self.score_scale = weight("score_scale", (), "ones") if self.scale else None
        self.position_kernel = self.position_vector = None
        if self.window is not None:
            self.position_kernel = weight("position_kernel", (d_q, units))
            self.position_vector = weight("position_vector", (units,))
        self.built = True

    def project_keys(self, key):
        """The key-side part of the score, once per source sequence.

        `(B, T_v, d_k)` -> `key` itself for "dot", `key W_a` `(B, T_v, d_q)` for
        "general", the key half of W_a times `key` `(B, T_v, units)` for
        "concat". Pass it as `projected_keys` at every decoding step.
        """
        self._check_built("project_keys", key.shape)
        if self.score == "dot":
            return ops.cast(key, self.compute_dtype)  # (B, T_v, d_k)
        if self.score == "general":
            kernel = self.general_kernel  # (d_k, d_q)
        else:
            d_q = self.concat_kernel.shape[0] - key.shape[-1]
            kernel = self.concat_kernel[d_q:]  # (d_k, U): the key half of W_a
        return self._project(key, kernel)  # (B, T_v, d_q|U)

    def predicted_position(self, query, value, value_mask=None):
        """Local-p's aligned position p_t = S * sigmoid(v_p^T tanh(W_p h_t)).

        Args:
            query: `(B, d_q)` or `(B, T_q, d_q)`.
            value: `(B, T_v, d_v)`, for T_v when there is no mask.
            value_mask: boolean `(B, T_v)`; S is its number of True entries.

        Returns:
            float32 `(B,)` or `(B, T_q)`, in [0, S].
        """
        self._check_built("predicted_position", query.shape)
        if self.window is None:
            raise ValueError("`predicted_position` needs local attention. Received: window=None")
        hidden = ops.tanh(self._project(query, self.position_kernel))  # (B, [T_q,] U)
        logits = ops.sum(hidden * ops.cast(self.position_vector, self.compute_dtype), axis=-1)
        if value_mask is None:
            length = ops.cast(ops.shape(value)[1], "float32")
        else:
            length = ops.sum(ops.cast(value_mask, "float32"), axis=-1)  # (B,)
            if len(query.shape) == 3:
                length = ops.expand_dims(length, -1)  # (B, 1)
        return length * ops.sigmoid(ops.cast(logits, "float32"))  # (B, [T_q])

    def _scores(self, query, projected_keys):
        if self.score != "concat":
            scores = ops.einsum("bqd,bkd->bqk", query, projected_keys)  # (B, T_q, T_v)
            if self.scaled:
                scores = scores * ops.cast(query.shape[-1] ** -0.5, scores.dtype)
        else:
            d_q = query.shape[-1]
            projected_query = self._project(query, self.concat_kernel[:d_q])  # (B, T_q, U)
            # W_q h_t + W_k hbar_s broadcast to (B, T_q, T_v, U).
            hidden = ops.expand_dims(projected_query, 2) + ops.expand_dims(projected_keys, 1)
            scores = ops.sum(ops.tanh(hidden) * self.score_vector, axis=-1)  # (B, T_q, T_v)
        return scores * self.score_scale if self.scale else scores

    def _weights(self, scores, query, value, value_mask):
        """Global: the softmax over the valid keys. Local-p: inside the window around p_t, times the Gaussian."""
        if self.window is None:
            return super()._weights(scores, query, value, value_mask)
        position = self.predicted_position(query, value, value_mask)  # (B, T_q)
        source = ops.cast(ops.arange(ops.shape(value)[1]), "float32")  # (T_v,)
        distance = source[None, None, :] - ops.expand_dims(position, -1)  # (B, T_q, T_v)
        in_window = ops.less_equal(ops.abs(distance), float(self.window))
        mask = attention_ops.combine_masks(in_window, attention_ops.padding_to_attention_mask(key_mask=value_mask))
        sigma = self.window / 2.0
        gaussian = ops.exp(-ops.square(distance) / (2.0 * sigma**2))  # (B, T_q, T_v)
        weights = attention_ops.masked_softmax(ops.cast(scores, "float32"), mask) * gaussian
        return ops.cast(weights, scores.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score": self.score,
                "scaled": self.scaled,
                "scale": self.scale,
                "window": self.window,
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
