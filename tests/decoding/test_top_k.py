import numpy as np
import pytest
import tensorflow as tf

from keras import ops

from keras_attention.decoding.top_k import blockwise_top_k

rng = np.random.default_rng(0)


def _numpy_top_k(values, k):
    """Largest first; equal values by lower index, as `ops.top_k` ranks them."""
    index = np.argsort(-values, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(values, index, axis=-1), index


def _cases():
    ties = np.round(rng.normal(size=(6, 1000)), 1).astype("float32")  # about 60 copies of each value
    masked = rng.normal(size=(3, 4, 997)).astype("float32")  # 997: the last block is padded
    masked[..., ::2] = -np.inf
    masked[0, 0, :990] = -np.inf  # fewer finite entries than the blocks hold
    flat = np.zeros((2, 300), "float32")  # every entry equal: the lowest indices win
    # A tie between blocks of different maxima (blocks of 8): 2.0 at 10 (block 1, max 2.0) and at 41
    # (block 5, max 2.5); the second place goes to index 10, though block 5 ranks first.
    crossed = np.zeros((1, 100), "float32")
    crossed[0, [10, 40, 41]] = [2.0, 2.5, 2.0]
    one_finite = np.full((2, 500), -np.inf, "float32")  # fewer finite entries than k: -inf ranks by index
    one_finite[:, 77] = 1.0
    return [(rng.normal(size=(5, 8000)).astype("float32"), 4), (ties, 4), (ties, 1), (masked, 3), (flat, 5),
            (crossed, 2), (one_finite, 3), (np.zeros((0, 4, 1000), "float32"), 4)]


@pytest.mark.parametrize("compiled", [False, True])
def test_blockwise_top_k_equals_numpy(compiled):
    fn = tf.function(blockwise_top_k, jit_compile=True, reduce_retracing=False) if compiled else blockwise_top_k
    for values, k in _cases():
        top, index = fn(values, k, block_size=8)
        expected_top, expected_index = _numpy_top_k(values, k)
        np.testing.assert_array_equal(ops.convert_to_numpy(index), expected_index)
        np.testing.assert_array_equal(ops.convert_to_numpy(top), expected_top)
        assert ops.convert_to_numpy(index).dtype == np.int32


def test_blockwise_top_k_with_an_unknown_batch_size():
    fn = tf.function(lambda v: blockwise_top_k(v, 4), input_signature=[tf.TensorSpec((None, 3, 500), tf.float32)])
    values = rng.normal(size=(2, 3, 500)).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(fn(values)[1]), _numpy_top_k(values, 4)[1])


def test_blockwise_top_k_small_axis_and_bad_arguments():
    values = rng.normal(size=(2, 20)).astype("float32")  # 20 <= 2 * k * block: plain ops.top_k
    np.testing.assert_array_equal(ops.convert_to_numpy(blockwise_top_k(values, 3)[1]), _numpy_top_k(values, 3)[1])
    with pytest.raises(ValueError, match="k=21"):
        blockwise_top_k(values, 21)
    with pytest.raises(ValueError, match="k=0"):
        blockwise_top_k(values, 0)
    with pytest.raises(ValueError, match="block_size=0"):
        blockwise_top_k(values, 2, block_size=0)
