import keras
import numpy as np

from keras import ops

from keras_attention.models import headwise_glorot_uniform


def test_headwise_glorot_uniform_is_keras_glorot_of_the_3d_kernel():
    """Keras' Glorot on a plain 2-D (N*d, H*d) kernel has the same limit as the head-wise fans."""
    shape = (64, 4, 16)
    headwise = ops.convert_to_numpy(headwise_glorot_uniform(seed=3)(shape))
    plain = ops.convert_to_numpy(keras.initializers.GlorotUniform(seed=3)((4 * 64, 16 * 64)))
    np.testing.assert_allclose(np.abs(headwise).max(), np.abs(plain).max(), rtol=0.02)
    np.testing.assert_allclose(headwise.std(), plain.std(), rtol=0.05)


def _query_and_key_kernels(initializer):
    attention = keras.layers.MultiHeadAttention(num_heads=4, key_dim=16, kernel_initializer=initializer)
    x = np.zeros((1, 3, 64), "float32")
    attention(x, x)
    return (ops.convert_to_numpy(attention.query_dense.kernel), ops.convert_to_numpy(attention.key_dense.kernel))


def test_a_seeded_initializer_starts_query_and_key_equal_and_an_unseeded_one_does_not():
    """What the docstring warns about: Keras clones the initializer, seed included, for each projection."""
    query, key = _query_and_key_kernels(headwise_glorot_uniform(seed=3))
    np.testing.assert_array_equal(query, key)
    query, key = _query_and_key_kernels(headwise_glorot_uniform())
    assert not np.array_equal(query, key)
