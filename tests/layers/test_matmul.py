"""`matmul.matmul`: the product and its gradients, against NumPy; the transposed layout under XLA."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.layers import attention_ops
from keras_attention.layers.matmul import matmul

rng = np.random.default_rng(3)


def _gradients(fn, x, kernel, dy):
    """(y, dL/dx, dL/dkernel) for L = sum(fn(x, kernel) * dy)."""
    x, kernel = tf.convert_to_tensor(x), tf.convert_to_tensor(kernel)
    with tf.GradientTape() as tape:
        tape.watch([x, kernel])
        y = fn(x, kernel)
        loss = tf.reduce_sum(y * dy)
    dx, dkernel = tape.gradient(loss, [x, kernel])
    return y, dx, dkernel


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("shape", [(7, 5, 3), (1, 4, 9), (33, 16, 2)])
def test_product_and_gradients_match_numpy(jit, shape):
    m, k, n = shape
    x = rng.normal(size=(m, k)).astype("float32")
    kernel = rng.normal(size=(k, n)).astype("float32")
    dy = rng.normal(size=(m, n)).astype("float32")
    run = tf.function(lambda a, b, c: _gradients(matmul, a, b, c), jit_compile=True) if jit else None
    y, dx, dkernel = (t.numpy() for t in (run(x, kernel, dy) if jit else _gradients(matmul, x, kernel, dy)))
    np.testing.assert_allclose(y, x @ kernel, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, dy @ kernel.T, rtol=1e-5, atol=1e-5)  # worked by hand: d(xW)/dx = dy W^T
    np.testing.assert_allclose(dkernel, x.T @ dy, rtol=1e-5, atol=1e-5)  # and d(xW)/dW = x^T dy


def _compiled_gradient_hlo(m, k, n):
    x = tf.random.normal((m, k))
    kernel = tf.random.normal((k, n))

    @tf.function(jit_compile=True)
    def gradient(x, kernel):
        with tf.GradientTape() as tape:
            tape.watch(kernel)
            loss = tf.reduce_sum(attention_ops.dense_project(x, kernel) ** 2)
        return tape.gradient(loss, kernel)

    return gradient.experimental_get_compiler_ir(x, kernel)(stage="hlo")


def test_xla_computes_the_kernel_gradient_from_a_materialised_transpose():
    hlo = _compiled_gradient_hlo(12, 6, 4)
    barriers = [line for line in hlo.splitlines() if "opt-barrier(" in line]
    assert len(barriers) == 1 and "f32[6,12]" in barriers[0]  # x^T, (K, M), held by the barrier
    # ... and what reads it is the kernel gradient's dot, (K, M) x (M, N).
    dots = [line for line in hlo.splitlines() if " dot(" in line and "f32[6,4]" in line.split("=")[1][:12]]
    assert dots, hlo


def test_eager_and_plain_graph_products_have_no_barrier():
    x, kernel = tf.random.normal((3, 2)), tf.random.normal((2, 5))
    graph = tf.function(lambda a, b: matmul(a, b)).get_concrete_function(x, kernel).graph
    assert not [op for op in graph.get_operations() if "Barrier" in op.type]
    np.testing.assert_allclose(matmul(x, kernel).numpy(), x.numpy() @ kernel.numpy(), rtol=1e-5, atol=1e-6)


def test_mixed_precision_gradient_keeps_the_dtype():
    x = tf.cast(tf.random.normal((8, 4)), "float16")
    kernel = tf.cast(tf.random.normal((4, 3)), "float16")
    dy = tf.cast(tf.random.normal((8, 3)), "float16")
    run = tf.function(lambda a, b, c: _gradients(matmul, a, b, c), jit_compile=True)
    y, dx, dkernel = run(x, kernel, dy)
    assert y.dtype == dx.dtype == dkernel.dtype == tf.float16
    expected = x.numpy().astype("float32").T @ dy.numpy().astype("float32")
    np.testing.assert_allclose(dkernel.numpy().astype("float32"), expected, rtol=2e-2, atol=2e-2)


def test_rank_other_than_two_names_the_shapes():
    with pytest.raises(ValueError, match=r"x.shape=\(2, 3, 4\), kernel.shape=\(4, 5\)"):
        matmul(tf.zeros((2, 3, 4)), tf.zeros((4, 5)))


def test_second_order_gradients_under_xla_equal_plain_products():
    """A gradient of the gradient (e.g. a gradient penalty) goes through the custom gradient."""
    x = tf.random.normal((6, 4))
    kernel = tf.Variable(tf.random.normal((4, 3)))

    def gradient_norm_gradient(product):
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                loss = tf.reduce_sum(tf.tanh(product(x, kernel)) ** 2)
            gradient = inner.gradient(loss, kernel)
            norm = tf.reduce_sum(gradient * gradient)
        return outer.gradient(norm, kernel)

    ours = tf.function(lambda: gradient_norm_gradient(matmul), jit_compile=True)()
    plain = tf.function(lambda: gradient_norm_gradient(tf.matmul))()
    np.testing.assert_allclose(ours.numpy(), plain.numpy(), rtol=1e-4, atol=1e-5)
