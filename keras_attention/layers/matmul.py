"""A 2-D matrix product whose kernel gradient reads its input transposed.

The gradient of `y = x @ kernel` with respect to the kernel is
`x^T @ dy`, a product that contracts the rows of both operands. Timed alone
on this project's CPU machine, XLA's kernels ran that form slower than the
same product with `x^T` already laid out in memory, even counting the copy,
at every Transformer-layer shape tried (most for a tall input and a narrow
output, such as a feed-forward layer's `(1536, 1024)^T x (1536, 256)`).
XLA folds a plain transpose back into the product, so `matmul` writes `x^T`
out behind an optimisation barrier, which XLA cannot see through. Outside
XLA, TensorFlow's own kernels take the transposed operand directly and this
is `ops.matmul`. The maths is the same either way (results agree to float32
rounding); only a memory layout changes.

Where it pays: `MultiHeadAttention`'s projections (`dense_project`); with
it the layer's forward and backward pass at 64 tokens went from 0.96-0.98
of Keras' speed to 1.04 (`scripts/benchmark_attention.py`,
benchmarks/RESULTS.md at 8068402). Inside a whole Transformer training step XLA
already chooses layouts that make the difference vanish (no change measured
in `scripts/benchmark_training.py`).
"""

import keras
from keras import ops

from keras_attention.layers.xla_context import in_xla_compilation

try:
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python.xla import optimization_barrier
except ImportError:  # pragma: no cover - TensorFlow without XLA's ops: plain products
    optimization_barrier = None


def matmul(x, kernel):
    """`x @ kernel` for a 2-D `x` `(M, K)` and `kernel` `(K, N)` -> `(M, N)`.

    Under XLA (TensorFlow backend) its gradient computes the kernel's part
    as `transpose(x) @ dy` with the transpose materialised (see the module
    docstring); elsewhere it is `keras.ops.matmul`.

    Example:

    >>> x = keras.ops.ones((3, 2))
    >>> tuple(matmul(x, keras.ops.ones((2, 5))).shape)
    (3, 5)
    """
    if len(x.shape) != 2 or len(kernel.shape) != 2:
        raise ValueError(
            "`matmul` multiplies 2-D tensors (M, K) x (K, N). "
            f"Received: x.shape={tuple(x.shape)}, kernel.shape={tuple(kernel.shape)}"
        )
    if keras.backend.backend() != "tensorflow" or optimization_barrier is None or not in_xla_compilation():
        return ops.matmul(x, kernel)
    return _matmul_transposed_kernel_gradient(x, kernel)


if optimization_barrier is not None:

    @tf.custom_gradient
    def _matmul_transposed_kernel_gradient(x, kernel):
        def gradient(dy):
            dx = tf.matmul(dy, kernel, transpose_b=True)  # (M, N) x (N, K) -> (M, K)
            (x_transposed,) = optimization_barrier(tf.transpose(x))  # (K, M), laid out so in memory
            dkernel = tf.matmul(x_transposed, dy)  # (K, M) x (M, N) -> (K, N)
            return dx, dkernel

        return tf.matmul(x, kernel), gradient
