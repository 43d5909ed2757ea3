"""The Transformer's learning-rate schedule (Vaswani et al., 2017, section 5.3)."""

import keras
from keras import ops

from keras_attention.base.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    The rate grows linearly for `warmup_steps` steps, then decays with the
    inverse square root of the step; the peak, at `step == warmup_steps`, is
    `scale * (d_model * warmup_steps)^-0.5`. Steps are counted from 1 (the
    optimizer's iteration 0 is step 1).

    Args:
        d_model: int. Model width. The paper's base model uses 512.
        warmup_steps: int. Defaults to 4000 (the paper's value).
        scale: float. Multiplier for small data sets and batches. Defaults to 1.

    Example:

    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> round(float(schedule(3999)), 6)  # the peak, at step 4000
    0.000699
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        self.d_model = check_positive_int("d_model", d_model)
        self.warmup_steps = check_positive_int("warmup_steps", warmup_steps)
        if not scale > 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.scale = float(scale)

    @classmethod
    def with_peak(cls, d_model, warmup_steps, peak):
        """The schedule scaled so that its rate at the end of the warm-up is `peak`.

        >>> schedule = TransformerSchedule.with_peak(256, warmup_steps=2000, peak=1e-3)
        >>> round(float(schedule(1999)), 6)
        0.001
        """
        if not peak > 0:
            raise ValueError(f"`peak` must be positive. Received: peak={peak!r}")
        d_model = check_positive_int("d_model", d_model)
        warmup_steps = check_positive_int("warmup_steps", warmup_steps)
        return cls(d_model, warmup_steps, scale=peak / (d_model * warmup_steps) ** -0.5)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        rate = ops.minimum(ops.rsqrt(step), step * warmup**-1.5)
        return self.scale * (self.d_model**-0.5) * rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
