"""Additive attention (Bahdanau, Cho and Bengio, 2014, section 3.1 and appendix A.1.2)."""

import math

import keras
from keras import ops

from keras_attention.base.validation import check_positive_int
from keras_attention.layers.alignment_attention import AlignmentAttention
from keras_attention.layers.validation import check_attention_shapes


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauAttention(AlignmentAttention):
    """Additive (Bahdanau) attention for RNN encoder-decoders.

    Implements the alignment model of "Neural Machine Translation by Jointly
    Learning to Align and Translate" (Bahdanau, Cho and Bengio, 2014,
    https://arxiv.org/abs/1409.0473), section 3.1 and appendix A.1.2. Each
    query q_i (a decoder state) is scored against every key k_j (an encoder
    annotation) with a one-hidden-layer network,

        e_ij = v^T tanh(W_q q_i + W_k k_j),

    the scores are turned into weights alpha_ij by a softmax over the keys, and
    the context is c_i = sum_j alpha_ij value_j. W_q and W_k have no bias.

    With `normalize=True` the score vector is weight-normalised (Salimans and
    Kingma, 2016, https://arxiv.org/abs/1602.07868), the form TensorFlow NMT
    calls "normed_bahdanau": e_ij = g (v / ||v||)^T tanh(W_q q_i + W_k k_j + b),
    with a learned scalar g (initialised to sqrt(1 / units)) and a learned bias
    b (initialised to zeros).

    Decoding one step at a time: an RNN decoder calls the layer once per step
    with a rank-2 query `(B, d_q)`. The key projection W_k k does not depend on
    the step, so compute it once per source sequence with `project_keys(key)`
    and pass it as `projected_keys`; the result is the same.

    Masking: `value_mask` (filled in from the value's Keras mask when not
    given) marks the valid keys; padded keys get exactly zero weight. It covers
    `key` too.

    Args:
        units: int. Size of the hidden layer of the score network.
        normalize: bool. Use the weight-normalised score. Defaults to False.
        kernel_initializer: initializer for W_q, W_k and v. Defaults to
            `"glorot_uniform"`.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, d_q)` (one decoder step) or `(B, T_q, d_q)` (all steps).
        value: `(B, T_v, d_v)`.
        key: `(B, T_v, d_k)`. Defaults to `value`.
        value_mask: boolean `(B, T_v)`, True for valid keys.
        projected_keys: `(B, T_v, units)` from `project_keys`, or None to
            project `key` here.
        return_attention_scores: bool. Also return the weights.
        training: bool. Unused (no dropout); accepted for uniformity.

    Returns:
        The context, `(B, d_v)` for a rank-2 query and `(B, T_q, d_v)` for a
        rank-3 one; with `return_attention_scores`, `(context, weights)` where
        the weights are `(B, T_v)` or `(B, T_q, T_v)` and sum to one over the
        valid keys.

    Example:

    >>> layer = BahdanauAttention(units=8)
    >>> encoder_out = keras.random.normal((2, 7, 6))
    >>> state = keras.random.normal((2, 5))
    >>> context, weights = layer(state, encoder_out, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 6), (2, 7))

    References:
        Bahdanau, Cho, Bengio (2014), https://arxiv.org/abs/1409.0473.
        Salimans, Kingma (2016), https://arxiv.org/abs/1602.07868.
    """

    def __init__(self, units, normalize=False, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.normalize = bool(normalize)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        check_attention_shapes(query_shape, value_shape, key_shape)
        self.query_kernel = self.add_weight(
            name="query_kernel",
            shape=(query_shape[-1], self.units),
            initializer=self.kernel_initializer,
        )
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(key_shape[-1], self.units),
            initializer=self.kernel_initializer,
        )
        self.score_vector = self.add_weight(
            name="score_vector", shape=(self.units,), initializer=self.kernel_initializer
        )
        self.score_scale = self.score_bias = None
        if self.normalize:
            self.score_scale = self.add_weight(
                name="score_scale",
                shape=(),
                initializer=keras.initializers.Constant(math.sqrt(1.0 / self.units)),
            )
            self.score_bias = self.add_weight(
                name="score_bias", shape=(self.units,), initializer="zeros"
            )
        self.built = True

    def project_keys(self, key):
        """W_k k for every key: `(B, T_v, d_k)` -> `(B, T_v, units)`.

        Compute it once per source sequence and pass it to every decoding step
        as `projected_keys`. The layer must be built (called once, or
        `build(query_shape, value_shape)`), since W_k is created with W_q.
        """
        self._check_built("project_keys", key.shape)
        return self._project(key, self.key_kernel)  # (B, T_v, U)

    def _scores(self, query, projected_keys):
        projected_query = self._project(query, self.query_kernel)  # (B, T_q, U)
        # Score every (query, key) pair: W_q q_i + W_k k_j broadcast to (B, T_q, T_v, U).
        hidden = ops.expand_dims(projected_query, 2) + ops.expand_dims(projected_keys, 1)
        score_vector = self.score_vector  # (U,)
        if self.normalize:
            hidden = hidden + self.score_bias
            norm = ops.sqrt(ops.sum(ops.square(score_vector)))
            score_vector = self.score_scale * score_vector / norm  # g v / ||v||
        return ops.sum(ops.tanh(hidden) * score_vector, axis=-1)  # (B, T_q, T_v)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "normalize": self.normalize,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
