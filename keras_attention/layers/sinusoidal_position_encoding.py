"""Sinusoidal position encoding (Vaswani et al., 2017, section 3.5)."""

import keras
from keras import ops


def sinusoidal_table(length, dim, start_index=0, max_wavelength=10000.0, dtype="float32"):
    """The (length, dim) table PE(pos, 2i) = sin(pos / w^(2i/dim)), PE(pos, 2i+1) = cos(...).

    Rows are positions `start_index .. start_index + length - 1`; `w` is
    `max_wavelength`. Sine and cosine alternate along the feature axis, as in
    the paper's formula.
    """
    positions = ops.cast(ops.arange(length) + start_index, "float32")  # (T,)
    features = ops.arange(dim)
    exponent = ops.cast(2 * (features // 2), "float32") / float(dim)  # 2i/d for 2i and 2i+1
    inv_wavelength = ops.power(float(max_wavelength), -exponent)  # (d,)
    angles = ops.expand_dims(positions, 1) * ops.expand_dims(inv_wavelength, 0)  # (T, d)
    is_cos = ops.cast(features % 2, "float32")  # 1 at odd features
    table = ops.sin(angles) * (1.0 - is_cos) + ops.cos(angles) * is_cos
    return ops.cast(table, dtype)


@keras.saving.register_keras_serializable(package="keras_attention")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The fixed sine/cosine position signal of "Attention Is All You Need".

    Vaswani et al. (2017, https://arxiv.org/abs/1706.03762), section 3.5:
    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) and
    PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)). Each pair of features is a
    sinusoid of its own wavelength (from 2*pi to 10000*2*pi), so for any offset
    k, PE(pos + k) is a linear function of PE(pos), which the paper gives as
    the reason it lets attention find relative positions. The layer has no
    weights and works for any length.

    The layer returns the encoding, not the sum, so a model decides how to
    combine it (usually `x + encoding(x)`).

    Args:
        max_wavelength: float. The base of the geometric progression of
            wavelengths. Defaults to 10000 (the paper's value).
        **kwargs: standard layer arguments.

    Call arguments:
        inputs: `(B, T, d)` tensor; only its shape and dtype are used.
        start_index: int or scalar int tensor, the position of the first row
            (for step-by-step decoding). Defaults to 0.

    Returns:
        `(B, T, d)`: the encoding of positions `start_index..start_index+T-1`,
        broadcast over the batch.

    Example:

    >>> x = keras.random.normal((2, 10, 16))
    >>> y = x + SinusoidalPositionEncoding()(x)
    >>> tuple(y.shape)
    (2, 10, 16)
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        if not max_wavelength > 1:
            raise ValueError(
                f"`max_wavelength` must be greater than 1. Received: max_wavelength={max_wavelength!r}"
            )
        self.max_wavelength = float(max_wavelength)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        table = sinusoidal_table(
            shape[-2], inputs.shape[-1], start_index, self.max_wavelength, self.compute_dtype
        )  # (T, d)
        return ops.broadcast_to(table, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["max_wavelength"] = self.max_wavelength
        return config
