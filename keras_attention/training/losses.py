"""Masked sparse cross-entropy with label smoothing, averaged over real tokens."""

import keras
from keras import ops

from keras_attention.base.validation import check_rate


def _sum_over_replicas(value):
    """`value` summed over all replicas when called inside `strategy.run`, else `value`.

    Keras calls a loss once per replica on that replica's part of the batch.
    Summing the token count over replicas lets each replica divide by the
    count of the whole global batch.
    """
    if keras.backend.backend() != "tensorflow":
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedSparseCrossEntropy(keras.losses.Loss):
    """Per-token cross-entropy from logits that ignores padding.

    Padding (`y_true == pad_id`) contributes nothing, and the loss is the mean
    over the real tokens of the batch, so a batch padded to a longer length
    gives exactly the same loss.

    Under a `tf.distribute` strategy each replica returns the sum of its
    token losses divided by the token count of the whole global batch (an
    all-reduce of the counts). Keras adds up the replicas' gradients, so the
    update is that of the global per-token mean, exactly, however unevenly
    the real tokens fall between replicas. (Keras divides only losses with a
    mean reduction by the replica count; this loss has `reduction="none"`
    and is not divided again.)

    With `label_smoothing=eps` the target distribution is (1 - eps) on the
    true token plus eps spread evenly over the whole vocabulary of size V, as
    in Szegedy et al. (2016, https://arxiv.org/abs/1512.00567) and the
    Transformer paper (eps = 0.1, section 5.4):
    loss = (1 - eps) * (-log p_y) + eps * mean_k(-log p_k).

    Args:
        label_smoothing: float in [0, 1). Defaults to 0.
        pad_id: int. The padding id in `y_true`. Defaults to 0.
        name: str. Defaults to "masked_sparse_cross_entropy".

    Call arguments:
        y_true: int `(B, T)`. y_pred: float logits `(B, T, V)`.

    Returns:
        A scalar: the mean loss over the non-padding tokens (0 if there are none).

    Example:

    >>> loss = MaskedSparseCrossEntropy(label_smoothing=0.1)
    >>> y_true = keras.ops.convert_to_tensor([[3, 1, 0]])
    >>> float(loss(y_true, keras.ops.zeros((1, 3, 5)))) == float(keras.ops.log(5.0))
    True
    """

    def __init__(self, label_smoothing=0.0, pad_id=0, name="masked_sparse_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="none", **kwargs)
        self.label_smoothing = check_rate("label_smoothing", label_smoothing)
        self.pad_id = int(pad_id)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        logits = ops.cast(y_pred, "float32")  # (B, T, V)
        # With log p_k = z_k - logsumexp(z), the smoothed cross-entropy is
        # logsumexp(z) - (1 - eps) z_y - eps mean_k(z): reductions over the
        # logits only, without materialising a (B, T, V) log-softmax.
        log_norm = ops.logsumexp(logits, axis=-1)  # (B, T)
        true_logit = ops.take_along_axis(logits, y_true[..., None], axis=-1)[..., 0]  # (B, T)
        eps = self.label_smoothing
        per_token = log_norm - (1.0 - eps) * true_logit
        if eps:
            per_token = per_token - eps * ops.mean(logits, axis=-1)
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        count = _sum_over_replicas(ops.sum(mask))  # real tokens in the global batch
        return ops.sum(per_token * mask) / ops.maximum(ops.stop_gradient(count), 1.0)

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config
