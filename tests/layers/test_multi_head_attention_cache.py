"""MultiHeadAttention's cache in users' own models: functional outputs, padding while it fills, index checks."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras import ops

from keras_attention.layers import MultiHeadAttention
from tests.layers.test_multi_head_attention import _np, _padding_mask, _randn
from tests.test_case import one_shape_under_jax, run_layer_test

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

# The cache in users' own models -------------------------------------------------


def test_layer_harness_self_attention_cache(tmp_path):
    """A cache fed through a functional model: output, weights and the updated cache come out."""
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4},
        {"query": _randn(2, 3, 8), "value": _randn(2, 3, 8), "cache": (np.zeros((2, 2, 6, 4), "float32"),) * 2},
        call_kwargs={"cache_update_index": 2, "use_causal_mask": True, "return_attention_scores": True},
        expected_output_shape=((2, 3, 8), (2, 2, 3, 6), (2, 2, 6, 4), (2, 2, 6, 4)),
        run_fit=False,  # the cache write is not differentiable on TensorFlow; the other harness runs fit
        tmp_path=tmp_path,
    )


def test_layer_harness_cross_attention_cache(tmp_path):
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4},
        {"query": _randn(2, 3, 8), "value": _randn(2, 7, 8), "value_mask": _padding_mask(2, 7),
         "cache": (_randn(2, 2, 7, 4), _randn(2, 2, 7, 4))},
        expected_output_shape=((2, 3, 8), (2, 2, 7, 4), (2, 2, 7, 4)),
        tmp_path=tmp_path,
    )


@settings(max_examples=16, deadline=None, derandomize=True, database=None)
@given(pads=st.lists(st.integers(0, 4), min_size=one_shape_under_jax(1, 3), max_size=3), left=st.booleans(),
       seed=st.integers(0, 99))
def test_cached_prefill_and_steps_equal_the_full_pass_on_padded_rows(pads, left, seed):
    """Property: with padding (left or right, random amounts), filling the cache in one call or one
    token at a time (the mask over the whole cache) gives the full pass's numbers at real positions."""
    length, batch = 6, len(pads)
    data = np.random.default_rng(seed)
    x = data.normal(size=(batch, length, 8)).astype("float32")
    real = np.arange(length)[None, :] < (length - np.array(pads))[:, None]
    if left:
        real = real[:, ::-1]
    x[~real] = 50.0  # padding holds garbage
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    full = _np(layer(x, x, query_mask=real, value_mask=real, use_causal_mask=True))
    cache = layer.init_cache(batch, length + 2)
    prefill, _ = layer(x, x, query_mask=real, value_mask=real, use_causal_mask=True, cache=cache, cache_update_index=0)
    np.testing.assert_allclose(_np(prefill)[real], full[real], atol=1e-5)
    whole = np.concatenate([real, np.ones((batch, 2), bool)], axis=1)  # (B, T_max): later slots real
    steps = []
    for i in range(length):
        y, cache = layer(x[:, i:i + 1], x[:, i:i + 1], value_mask=whole, use_causal_mask=True, cache=cache,
                         cache_update_index=i)
        steps.append(_np(y))
    np.testing.assert_allclose(np.concatenate(steps, axis=1)[real], full[real], atol=1e-5)


def test_a_mask_over_the_new_tokens_hides_only_them():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = _randn(1, 4, 8)
    cache = layer.init_cache(1, 4)
    _, cache = layer(x[:, :3], x[:, :3], use_causal_mask=True, cache=cache, cache_update_index=0)
    hidden = np.array([[False]])
    _, scores, _ = layer(x[:, 3:], x[:, 3:], value_mask=hidden, use_causal_mask=True, cache=cache,
                         cache_update_index=3, return_attention_scores=True)
    weights = _np(scores)[0, :, 0]  # (N, T_max)
    np.testing.assert_array_equal(weights[:, 3], 0.0)  # the new, masked slot
    np.testing.assert_allclose(weights[:, :3].sum(-1), 1.0, atol=1e-6)  # the earlier slots count as real


def test_a_cache_without_the_causal_mask_never_reads_its_empty_slots():
    """Without `use_causal_mask` the new tokens see every filled slot, both ways, and nothing after."""
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = _randn(2, 5, 8)
    full = _np(layer(x, x))  # bidirectional attention over the 5 tokens
    cache = layer.init_cache(2, 9)
    _, cache = layer(x[:, :2], x[:, :2], cache=cache, cache_update_index=0)
    y, scores, _ = layer(x[:, 2:], x[:, 2:], cache=cache, cache_update_index=2, return_attention_scores=True)
    np.testing.assert_array_equal(_np(scores)[..., 5:], 0.0)
    np.testing.assert_allclose(_np(y), full[:, 2:], atol=1e-5)


@pytest.mark.parametrize("index", [-1, 5, 6, 50])
def test_a_cache_index_out_of_range_is_refused_on_every_backend(index):
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    cache = layer.init_cache(2, 6)
    x = _randn(2, 2, 8)
    for given_index in (index, ops.convert_to_tensor(index, "int32")):
        with pytest.raises(ValueError, match=re.escape(f"`cache_update_index` must be in [0, 4]: 2 new token(s) in "
                                                       f"a cache of 6 slots. Received: cache_update_index={index}")):
            layer(x, x, use_causal_mask=True, cache=cache, cache_update_index=given_index)


@pytest.mark.parametrize("kwargs, name, shape", [
    ({"value_mask": np.ones((2, 6), bool)}, "value_mask", (2, 6)),
    ({"key_mask": np.ones((2, 7, 1), bool)}, "key_mask", (2, 7, 1)),
    ({"query_mask": np.ones((2, 7), bool)}, "query_mask", (2, 7)),
    ({"attention_mask": np.ones((2, 5, 5), bool)}, "attention_mask", (2, 5, 5)),
])
def test_a_mask_of_the_wrong_shape_is_named_with_its_shape(kwargs, name, shape):
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    with pytest.raises(ValueError, match=re.escape(f"`{name}` must have shape") + ".*"
                       + re.escape(f"Received: {name}.shape={shape}")):
        layer(_randn(2, 5, 8), _randn(2, 7, 8), **kwargs)


def test_a_cache_mask_over_the_whole_cache_beside_one_over_the_new_tokens():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    cache = layer.init_cache(2, 6)
    x = _randn(2, 2, 8)
    whole, new = np.ones((2, 6), bool), np.ones((2, 2), bool)
    y, _ = layer(x, x, value_mask=whole, key_mask=new, use_causal_mask=True, cache=cache, cache_update_index=0)
    assert tuple(y.shape) == (2, 2, 8)


def test_new_tokens_that_do_not_fit_the_cache_are_named():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    with pytest.raises(ValueError, match="5 new tokens do not fit a cache of 3 slots"):
        layer(_randn(2, 5, 8), _randn(2, 5, 8), cache=layer.init_cache(2, 3), cache_update_index=0)
