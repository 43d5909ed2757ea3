"""The one CPU-specific trick the library keeps: cheaper dropout random numbers under XLA on a CPU.

`keras.layers.Dropout` (TensorFlow backend) draws one float32 uniform number
per element with the Philox generator. On a CPU under XLA that draw is a
large part of a Transformer training step. `threefry_dropout` draws 32-bit
words with the ThreeFry generator (Salmon et al. 2011, "Parallel random
numbers: as easy as 1, 2, 3"), which XLA compiles to integer additions,
rotations and XORs, and splits each word into two 16-bit numbers, one per
element. `scripts/benchmark_training.py --ab cpu_dropout` measures what it
gains on a whole training step (`benchmarks/training.json`).

One switch turns it on: `use_cpu_dropout(model)` (the training recipe calls
it when `TrainConfig.cpu_dropout` is True, the default). It changes the
model's Keras dropout layers (embeddings, residual branches, attention
weights) into `CPUDropout`, which takes the cheap path only where it was
measured to pay: the TensorFlow backend, inside an XLA compilation, with no
GPU visible. Everywhere else it is Keras' dropout, bit for bit. The layers
package never uses it.

The drop probability is `rate` rounded to a multiple of 1/65536 (for 0.1:
6554/65536 = 0.100006); the kept elements are scaled by the inverse of the
exact keep probability, so the expected output equals the input.
"""

__all__ = ["CPUDropout", "threefry_dropout", "use_cpu_dropout"]


import keras

LEVELS = 65536  # a decision is a 16-bit number: kept when >= the threshold


def _in_xla_on_cpu():
    """True while TensorFlow traces a function for XLA (`jit_compile=True`) and no GPU is visible."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    try:
        from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
    except ImportError:  # pragma: no cover - a TensorFlow without it: Keras' dropout
        return False
    if tf.executing_eagerly() or tf.config.list_logical_devices("GPU"):
        return False
    return GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def threefry_dropout(x, rate, seed_generator):
    """Zero each element of `x` with probability ~`rate` (ThreeFry, 16 bits a decision); scale the rest.

    Args:
        x: float tensor of any shape.
        rate: float in (0, 1).
        seed_generator: a `keras.random.SeedGenerator`, advanced by one draw.
    """
    import tensorflow as tf

    threshold = round(rate * LEVELS)
    if threshold == 0:
        return x
    # Stateless TF ops want an int32 seed under XLA; the generator's state may be int64.
    seed = tf.cast(tf.math.floormod(tf.cast(seed_generator.next(), tf.int64), 2**31 - 1), tf.int32)
    size = tf.size(x)
    words = tf.random.stateless_uniform(
        ((size + 1) // 2,), seed, minval=None, maxval=None, dtype=tf.uint32, alg="threefry"
    )  # (ceil(n / 2),) full-range 32-bit words
    halves = tf.reshape(tf.bitcast(words, tf.uint16), (-1,))[:size]  # (n,) 16-bit numbers
    keep = tf.reshape(halves >= tf.constant(threshold, tf.uint16), tf.shape(x))
    scale = tf.cast(LEVELS / (LEVELS - threshold), x.dtype)
    return tf.where(keep, x * scale, tf.zeros_like(x))


@keras.saving.register_keras_serializable(package="keras_attention")
class CPUDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` that draws its mask with `threefry_dropout` under XLA on a CPU.

    Same arguments and config as Keras' layer. Outside an XLA compilation on
    a CPU with the TensorFlow backend, or with a `noise_shape`, it is Keras'
    dropout.

    Example:

    >>> layer = CPUDropout(0.5, seed=1)
    >>> x = keras.ops.ones((2, 4))
    >>> bool(keras.ops.all(layer(x) == x))  # inference: the identity
    True
    """

    def call(self, inputs, training=False):
        if not training or not 0 < self.rate < 1 or self.noise_shape is not None or not _in_xla_on_cpu():
            return super().call(inputs, training=training)
        return threefry_dropout(inputs, self.rate, self.seed_generator)


def use_cpu_dropout(model):
    """Make every `keras.layers.Dropout` of `model` a `CPUDropout`; return how many.

    Call it before the model's first compiled step. The layers keep their
    rate, seed and state; a model saved afterwards names `CPUDropout`, which
    loads anywhere and behaves as Keras' dropout off a CPU.
    """
    changed = 0
    for layer in model._flatten_layers(include_self=False):
        if type(layer) is keras.layers.Dropout:
            layer.__class__ = CPUDropout
            changed += 1
    return changed
