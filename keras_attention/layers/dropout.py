"""Dropout with cheaper random numbers: ThreeFry, 16 bits a decision.

`keras.layers.Dropout` (TensorFlow backend) calls
`tf.nn.experimental.stateless_dropout`, which draws one float32 uniform
number per element with the automatically selected generator (Philox). On a
CPU under XLA that draw dominates the cost of dropout, and dropout was a
fifth of a Transformer training step here. This version draws 32-bit words
with the ThreeFry generator (Salmon et al. 2011, "Parallel random numbers:
as easy as 1, 2, 3"), which XLA compiles to plain integer additions,
rotations and XORs, and splits every word into two 16-bit numbers, one per
element: half the words, each cheaper to make. `scripts/benchmark_dropout.py`
measures it against Keras' dropout (results in benchmarks/RESULTS.md at 8068402).
TensorFlow's own (non-XLA) kernels have no ThreeFry, so outside an XLA
compilation (eager, or `jit_compile=False`) this is Keras' dropout.

The drop probability is `rate` rounded to a multiple of 1/65536 (for 0.1:
6554/65536 = 0.100006), and the kept elements are scaled by the inverse of
the exact keep probability, so the expected output equals the input.
"""

import keras
import tensorflow as tf

from keras_attention.layers.validation import check_rate
from keras_attention.layers.xla_context import in_xla_compilation

LEVELS = 65536  # a decision is a 16-bit number: kept when >= the threshold


def fast_dropout(x, rate, seed):
    """Zero each element of `x` with probability ~`rate`; scale the rest to keep the mean.

    Args:
        x: float tensor of any shape.
        rate: float in [0, 1). The drop probability (rounded to a multiple
            of 1/65536).
        seed: a `keras.random.SeedGenerator` (advanced by one draw), an int,
            or None (Keras' own dropout with its global generator).

    Returns:
        A tensor like `x`. Outside an XLA compilation, or without a seed:
        `keras.random.dropout(x, rate, seed=seed)`.
    """
    rate = check_rate("rate", rate)
    if seed is None or not in_xla_compilation():
        return keras.random.dropout(x, rate, seed=seed) if rate > 0 else x
    threshold = round(rate * LEVELS)
    if threshold == 0:
        return x
    seed = seed.next() if isinstance(seed, keras.random.SeedGenerator) else tf.constant([int(seed), 0])
    # Stateless TF ops want an int32 seed under XLA; the generator's state may be int64.
    seed = tf.cast(tf.math.floormod(tf.cast(seed, tf.int64), 2**31 - 1), tf.int32)
    size = tf.size(x)
    words = tf.random.stateless_uniform(
        ((size + 1) // 2,), seed, minval=None, maxval=None, dtype=tf.uint32, alg="threefry"
    )  # (ceil(n / 2),) full-range 32-bit words
    halves = tf.reshape(tf.bitcast(words, tf.uint16), (-1,))[:size]  # (n,) 16-bit numbers
    keep = tf.reshape(halves >= tf.constant(threshold, tf.uint16), tf.shape(x))
    scale = tf.cast(LEVELS / (LEVELS - threshold), x.dtype)
    return tf.where(keep, x * scale, tf.zeros_like(x))


@keras.saving.register_keras_serializable(package="keras_attention")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with cheaper random numbers (see `fast_dropout`).

    Same arguments and config as `keras.layers.Dropout` (Srivastava et al.
    2014, https://jmlr.org/papers/v15/srivastava14a.html): during training
    each element is zeroed with probability `rate` (rounded to a multiple of
    1/65536) and the others are scaled so that the expected output is the
    input; at inference the input passes through. A `noise_shape`, or
    another Keras backend than TensorFlow, falls back to Keras' own dropout.

    Args:
        rate: float in [0, 1). The drop probability.
        noise_shape: optional shape of the binary mask, as in Keras.
        seed: optional int seed.
        **kwargs: standard layer arguments.

    Input and output shape: any, unchanged.

    Example:

    >>> layer = Dropout(0.5, seed=1)
    >>> x = keras.ops.ones((2, 4))
    >>> bool(keras.ops.all(layer(x) == x))  # inference: the identity
    True
    >>> set(keras.ops.convert_to_numpy(layer(x, training=True)).ravel().tolist()) <= {0.0, 2.0}
    True
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(rate, noise_shape=noise_shape, seed=seed, **kwargs)

    def call(self, inputs, training=False):
        if (
            not training
            or not 0 < self.rate < 1
            or self.noise_shape is not None
            or keras.backend.backend() != "tensorflow"
        ):
            return super().call(inputs, training=training)
        return fast_dropout(inputs, self.rate, self.seed_generator)
