"""What Bahdanau and Luong attention share: masks, the context, single steps, returned weights."""

import keras
from keras import ops

from keras_attention.layers import attention_ops
from keras_attention.layers.validation import check_mask, check_same_batch


class AlignmentAttention(keras.layers.Layer):
    """Base of `BahdanauAttention` and `LuongAttention` (not used directly).

    Both score each query (a decoder state) against every key (an encoder
    state), turn the scores into weights over the valid keys and return the
    weighted sum of the values. A subclass supplies only its score:
    `project_keys(key)` (the key-side work, done once per source sequence)
    and `_scores(query, projected_keys)` `(B, T_q, T_v)`; it may replace
    `_weights` (local attention does).

    Call arguments:
        query: `(B, d_q)` (one decoder step) or `(B, T_q, d_q)` (all steps).
        value: `(B, T_v, d_v)`.
        key: `(B, T_v, d_k)`. Defaults to `value`.
        value_mask: boolean `(B, T_v)`, True for valid keys; filled in from
            the value's Keras mask when not given. Padded keys get exactly
            zero weight.
        projected_keys: the output of `project_keys`, or None to compute it here.
        return_attention_scores: bool. Also return the weights.
        training: bool. Unused (no dropout); accepted for uniformity.

    Returns:
        The context, `(B, d_v)` for a rank-2 query and `(B, T_q, d_v)` for a
        rank-3 one; with `return_attention_scores`, `(context, weights)` where
        the weights are `(B, T_v)` or `(B, T_q, T_v)`.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def _check_built(self, method, shape):
        if not self.built:
            raise ValueError(
                f"`{method}` needs a built layer: call the layer once or call "
                f"`build(query_shape, value_shape)` first. Received: shape={tuple(shape)}"
            )

    def _project(self, x, kernel):
        """`x (..., d) @ kernel (d, u)` -> `(..., u)` in the compute dtype.

        One 2-D product: inside the RNN scan, XLA on a CPU ran the `einsum`
        form several times slower (scripts/benchmark_rnn_training.py), and
        could not differentiate the rank-3 `matmul` (a `tensordot`) when the
        batch size is unknown.
        """
        dtype = self.compute_dtype
        leading = ops.shape(x)[:-1]
        flat = ops.reshape(ops.cast(x, dtype), (-1, x.shape[-1]))  # (N, d)
        projected = ops.matmul(flat, ops.cast(kernel, dtype))  # (N, u)
        return ops.reshape(projected, (*leading, kernel.shape[-1]))  # (..., u)

    def _weights(self, scores, query, value, value_mask):
        """Softmax of the scores over the valid keys (float32 inside)."""
        return attention_ops.masked_softmax(scores, attention_ops.padding_to_attention_mask(key_mask=value_mask))

    def call(
        self,
        query,
        value,
        key=None,
        value_mask=None,
        projected_keys=None,
        return_attention_scores=False,
        training=None,
    ):
        check_same_batch(query=query.shape, value=value.shape, key=None if key is None else key.shape)
        check_mask("value_mask", value_mask, tuple(value.shape[:2]))
        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)  # (B, 1, d_q)
        if projected_keys is None:
            projected_keys = self.project_keys(value if key is None else key)
        scores = self._scores(query, projected_keys)  # (B, T_q, T_v)
        weights = self._weights(scores, query, value, value_mask)  # (B, T_q, T_v)
        context = ops.einsum("bqk,bkd->bqd", weights, value)  # (B, T_q, d_v)
        if single_step:
            context, weights = context[:, 0], weights[:, 0]  # (B, d_v), (B, T_v)
        if return_attention_scores:
            return context, weights
        return context

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return tuple(query_shape[:-1]) + (value_shape[-1],)

    def compute_output_spec(self, query, value, key=None, value_mask=None, projected_keys=None,
                            return_attention_scores=False, training=None):
        """Symbolic outputs: the context and, if asked, the weights `(B, [T_q,] T_v)`."""
        check_same_batch(query=query.shape, value=value.shape, key=None if key is None else key.shape)
        context = keras.KerasTensor(self.compute_output_shape(query.shape, value.shape), dtype=self.compute_dtype)
        if not return_attention_scores:
            return context
        weights = keras.KerasTensor(tuple(query.shape[:-1]) + (value.shape[1],), dtype=self.compute_dtype)
        return context, weights
