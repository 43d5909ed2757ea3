"""The CPU-specific tricks the library keeps, each behind its own switch: faster training steps under XLA on a CPU.

Both change how a step is computed, never what it computes, and both act only
where they were measured to pay: the TensorFlow backend, inside an XLA
compilation, with no GPU visible. Everywhere else the layers are Keras' own,
bit for bit. The layers package never uses them; the training recipe turns
them on (`ModelConfig.cpu_dropout`, `ModelConfig.cpu_rows`, both True by
default) and `scripts/benchmark_training.py` measures each on a whole
training step, alternating with the model without it (`benchmarks/training.json`).

`use_cpu_dropout(model)`: cheaper dropout random numbers.
`keras.layers.Dropout` (TensorFlow backend) draws one float32 uniform number
per element with the Philox generator. On a CPU under XLA that draw is a
large part of a Transformer training step. `threefry_dropout` draws 32-bit
words with the ThreeFry generator (Salmon et al. 2011, "Parallel random
numbers: as easy as 1, 2, 3"), which XLA compiles to integer additions,
rotations and XORs, and splits each word into two 16-bit numbers, one per
element. The model's Keras dropout layers (embeddings, residual branches,
attention weights) draw their masks so, as `CPUDropout` (the same dropout
as a layer of its own) does. The drop probability is `rate`
rounded to a multiple of 1/65536 (for 0.1: 6554/65536 = 0.100006); the kept
elements are scaled by the inverse of the exact keep probability, so the
expected output equals the input.

`use_cpu_rows(model)`: per-token layers on a matrix of rows. A dense layer,
a layer norm or an attention projection applied to `(B, T, d)` acts on each
token alone; with the switch, the model's `keras.layers.Dense`,
`LayerNormalization` and `EinsumDense` (its attention projections) reshape
the input to its `(B * T, d)` rows first and the result back after. The
numbers are the same, but the gradients of the biases and of the norm's
scale and offset become sums over the rows of one matrix, and each
projection one 2-D matrix product, which XLA's CPU backend runs faster than
the same work over two leading axes.

Both switches change the layers' `call` on those instances only: their
class, weights, config and saved form stay Keras' own.
"""

__all__ = ["CPUDropout", "threefry_dropout", "use_cpu_dropout", "use_cpu_rows"]


import math
import types

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


def _dropout_on_cpu(self, inputs, training=False):
    """`keras.layers.Dropout.call`, with its mask drawn by `threefry_dropout` under XLA on a CPU."""
    if not training or not 0 < self.rate < 1 or self.noise_shape is not None or not _in_xla_on_cpu():
        return keras.layers.Dropout.call(self, inputs, training=training)
    return threefry_dropout(inputs, self.rate, self.seed_generator)


@keras.saving.register_keras_serializable(package="keras_attention")
class CPUDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` that draws its mask with `threefry_dropout` under XLA on a CPU.

    Same arguments and config as Keras' layer. Outside an XLA compilation on
    a CPU with the TensorFlow backend, or with a `noise_shape`, it is Keras'
    dropout. `use_cpu_dropout` gives a model's own Keras dropout layers the
    same `call` without changing their class.

    Example:

    >>> layer = CPUDropout(0.5, seed=1)
    >>> x = keras.ops.ones((2, 4))
    >>> bool(keras.ops.all(layer(x) == x))  # inference: the identity
    True
    """

    call = _dropout_on_cpu


def use_cpu_dropout(layer):
    """Give every `keras.layers.Dropout` in `layer` (a model, or one dropout layer) `CPUDropout`'s
    `call`; return how many.

    Call it before the first compiled step. The layers keep their class,
    rate, seed and state: a model saved afterwards holds Keras' own dropout
    layers and loads anywhere, and so do its checkpoints into a model without
    the switch.
    """
    changed = 0
    for sublayer in layer._flatten_layers(include_self=True):
        if type(sublayer) is keras.layers.Dropout:
            sublayer.call = types.MethodType(_dropout_on_cpu, sublayer)
            changed += 1
    return changed


# Per-token layers on rows ---------------------------------------------------------


def _rows(x):
    """`(B, T, ..., d)` -> `(B * T, d')`, the leading two axes merged, the rest flattened, and `(B, T)`."""
    batch, length = keras.ops.shape(x)[0], keras.ops.shape(x)[1]
    return keras.ops.reshape(x, (-1, math.prod(x.shape[2:]))), (batch, length)


def _on_rows(inputs, ranks=(3, 4)):
    """Whether a per-token layer should run on the rows of `inputs`: of a rank in `ranks`, its axes after
    the first two known, under XLA on a CPU."""
    return len(inputs.shape) in ranks and None not in inputs.shape[2:] and _in_xla_on_cpu()


def _dense_on_rows(self, inputs, training=None):
    """`keras.layers.Dense.call` on the `(B * T, d)` rows of a `(B, T, d)` input."""
    if not _on_rows(inputs, ranks=(3,)):
        return type(self).call(self, inputs, training=training)
    rows, (batch, length) = _rows(inputs)  # (B * T, d)
    outputs = type(self).call(self, rows, training=training)  # (B * T, units)
    return keras.ops.reshape(outputs, (batch, length, outputs.shape[-1]))  # (B, T, units)


def _norm_on_rows(self, inputs):
    """`keras.layers.LayerNormalization.call` over the last axis, on the `(B * T, d)` rows of a 3-D input."""
    axes = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
    if list(axes) not in ([-1], [2]) or not _on_rows(inputs, ranks=(3,)):
        return type(self).call(self, inputs)
    rows, (batch, length) = _rows(inputs)  # (B * T, d)
    return keras.ops.reshape(type(self).call(self, rows), (batch, length, inputs.shape[-1]))  # (B, T, d)


# The projections of keras.layers.MultiHeadAttention: query, key and value
# `(B, T, d) x (d, N, H)`, and output `(B, T, N, H) x (N, H, d)`.
_PROJECTIONS = {"abc,cde->abde": 2, "abcd,cde->abe": 1}  # equation: axes of the kernel that make its columns


def _projection_on_rows(self, inputs, training=None):
    """`keras.layers.EinsumDense.call` for an attention projection (`abc,cde->abde` or `abcd,cde->abe`) as
    one 2-D product: the input's `(B * T, ...)` rows times the kernel as a matrix, plus the flattened bias.
    Any other equation, LoRA or a quantized kernel: Keras' call."""
    column_axes = _PROJECTIONS.get(self.equation)
    if column_axes is None or self.lora_enabled or self.quantization_mode is not None or not _on_rows(inputs):
        return type(self).call(self, inputs, training=training)
    rows, (batch, length) = _rows(inputs)  # (B * T, d) or (B * T, N * H)
    columns = tuple(self.kernel.shape)[-column_axes:]  # (N, H) or (d,)
    kernel = keras.ops.reshape(self.kernel, (-1, math.prod(columns)))  # (d, N * H) or (N * H, d)
    outputs = keras.ops.matmul(rows, kernel)  # (B * T, N * H) or (B * T, d)
    if self.bias is not None:
        outputs = keras.ops.add(outputs, keras.ops.reshape(self.bias, (-1,)))
    if self.activation is not None:
        outputs = self.activation(outputs)
    return keras.ops.reshape(outputs, (batch, length, *columns))  # (B, T, N, H) or (B, T, d)


_ON_ROWS = {
    keras.layers.Dense: _dense_on_rows,
    keras.layers.LayerNormalization: _norm_on_rows,
    keras.layers.EinsumDense: _projection_on_rows,
}


def use_cpu_rows(layer):
    """Run every `keras.layers.Dense`, `LayerNormalization` and `EinsumDense` in `layer` (a model, or one
    such layer) on the rows of its input under XLA on a CPU; return how many.

    Call it before the first compiled step. Only the layers' `call` changes,
    on those instances: their class, weights, config and saved form stay
    Keras' own, so a model saved afterwards loads anywhere as a plain Keras
    model, and so do its checkpoints into a model without the switch.
    """
    changed = 0
    for sublayer in layer._flatten_layers(include_self=True):
        on_rows = _ON_ROWS.get(type(sublayer))
        if on_rows is not None:
            sublayer.call = types.MethodType(on_rows, sublayer)
            changed += 1
    return changed
