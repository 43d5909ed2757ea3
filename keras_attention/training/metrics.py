"""Token accuracy that ignores padding."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedTokenAccuracy(keras.metrics.Metric):
    """Fraction of non-padding target tokens whose arg-max prediction is right.

    Counts are accumulated over batches (and summed across replicas under a
    distribution strategy), so the result is the accuracy over all real
    tokens seen, not a mean of per-batch accuracies.

    Args:
        pad_id: int. Padding id in `y_true`. Defaults to 0.
        name: str. Defaults to "token_accuracy".

    Example:

    >>> m = MaskedTokenAccuracy()
    >>> y_true = keras.ops.convert_to_tensor([[1, 2, 0]])
    >>> logits = keras.ops.one_hot(keras.ops.convert_to_tensor([[1, 3, 3]]), 4)
    >>> m.update_state(y_true, logits); float(m.result())
    0.5
    """

    def __init__(self, pad_id=0, name="token_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        mask = ops.not_equal(y_true, self.pad_id)
        hits = ops.logical_and(ops.equal(ops.cast(ops.argmax(y_pred, -1), "int32"), y_true), mask)
        self.correct.assign_add(ops.sum(ops.cast(hits, "float32")))
        self.total.assign_add(ops.sum(ops.cast(mask, "float32")))

    def result(self):
        return self.correct / ops.maximum(self.total, 1.0)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
