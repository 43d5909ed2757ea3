import re

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras import ops

from keras_attention.layers import MultiHeadAttention, attention_ops, scaled_dot_product_attention
from tests.test_case import gradients, run_layer_test

rng = np.random.default_rng(0)


def _randn(*shape):
    return rng.normal(size=shape).astype("float32")


def _padding_mask(batch, length, min_len=1):
    lengths = rng.integers(min_len, length + 1, size=batch)
    lengths[0] = length  # keep one unpadded row
    return np.arange(length)[None, :] < lengths[:, None]


def _pair(num_heads=2, key_dim=4, query_dim=8, value_dim=6, **kwargs):
    """Our layer and Keras' layer, built on the same shapes, with equal weights."""
    ours = MultiHeadAttention(num_heads, key_dim, **kwargs)
    theirs = keras.layers.MultiHeadAttention(num_heads, key_dim, **kwargs)
    q, v = _randn(3, 5, query_dim), _randn(3, 7, value_dim)
    ours(q, v)
    theirs(q, v)
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def _np(x):
    return ops.convert_to_numpy(x)


def test_layer_harness_with_masks(tmp_path):
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "dropout": 0.1},
        {
            "query": _randn(3, 5, 8),
            "value": _randn(3, 7, 6),
            "query_mask": _padding_mask(3, 5),
            "value_mask": _padding_mask(3, 7),
        },
        expected_output_shape=(3, 5, 8),
        tmp_path=tmp_path,
    )


def test_layer_harness_causal_with_scores(tmp_path):
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 3, "key_dim": 2, "value_dim": 5, "output_shape": 4},
        {"query": _randn(2, 6, 8), "value": _randn(2, 6, 8)},
        call_kwargs={"use_causal_mask": True, "return_attention_scores": True},
        expected_output_shape=((2, 6, 4), (2, 3, 6, 6)),
        tmp_path=tmp_path,
    )


def test_parity_with_keras_no_mask():
    ours, theirs = _pair()
    q, v, k = _randn(3, 5, 8), _randn(3, 7, 6), _randn(3, 7, 6)
    np.testing.assert_allclose(_np(ours(q, v, k)), _np(theirs(q, v, k)), atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_parity_with_keras_masks_and_scores(causal):
    ours, theirs = _pair()
    q, v = _randn(3, 5, 8), _randn(3, 7, 6)
    mask = rng.random((3, 5, 7)) > 0.3
    mask[..., 0] = True  # no query row fully masked
    a, a_scores = ours(
        q, v, attention_mask=mask, use_causal_mask=causal, return_attention_scores=True
    )
    b, b_scores = theirs(
        q, v, attention_mask=mask, use_causal_mask=causal, return_attention_scores=True
    )
    np.testing.assert_allclose(_np(a), _np(b), atol=1e-5)
    np.testing.assert_allclose(_np(a_scores), _np(b_scores), atol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_gradients_match_keras(jit):
    """Inputs' and weights' gradients equal Keras' (causal and padding masks, one row fully masked)."""
    ours, theirs = _pair()
    q, v = _randn(3, 5, 8), _randn(3, 7, 6)
    value_mask = _padding_mask(3, 7)
    value_mask[2] = False  # every key of row 2 hidden: uniform weights in both
    target = _randn(3, 5, 8)

    def grads(layer):
        def loss(q, v):
            return ops.sum(layer(q, v, value_mask=value_mask, use_causal_mask=True) * target)

        return gradients(loss, [q, v], layer.trainable_variables, jit=jit)

    for a, b in zip(grads(ours), grads(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_parity_with_keras_through_keras_masks():
    """Padding masks that flow from an Embedding(mask_zero=True) in a model."""
    ids_q = keras.Input((5,), dtype="int32")
    ids_v = keras.Input((7,), dtype="int32")
    embed = keras.layers.Embedding(20, 8, mask_zero=True)
    ours = MultiHeadAttention(2, 4)
    theirs = keras.layers.MultiHeadAttention(2, 4)
    # Separate embedding calls: Keras' layer clears the Keras mask of the
    # tensors it is given, which would hide it from a layer sharing them.
    model = keras.Model(
        [ids_q, ids_v],
        [ours(embed(ids_q), embed(ids_v)), theirs(embed(ids_q), embed(ids_v))],
    )
    theirs.set_weights(ours.get_weights())
    q_ids = rng.integers(1, 20, size=(4, 5))
    v_ids = rng.integers(1, 20, size=(4, 7))
    q_ids[1, 3:] = 0
    v_ids[2, 4:] = 0
    v_ids[3, 1:] = 0
    a, b = model([q_ids, v_ids])
    np.testing.assert_allclose(_np(a), _np(b), atol=1e-5)


def test_padded_keys_get_zero_weight():
    layer = MultiHeadAttention(2, 4)
    q, v = _randn(3, 5, 8), _randn(3, 7, 8)
    value_mask = _padding_mask(3, 7)
    _, scores = layer(q, v, value_mask=value_mask, return_attention_scores=True)
    scores = _np(scores)  # (B, N, T_q, T_v)
    padded = ~value_mask[:, None, None, :]
    assert np.all(scores[np.broadcast_to(padded, scores.shape)] == 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)


def test_matches_numpy_formula():
    """softmax(Q K^T / sqrt(d)) V per head, then the output projection, in NumPy."""
    layer = MultiHeadAttention(2, 3, use_bias=False)
    q, v = _randn(2, 4, 5), _randn(2, 6, 5)
    out = _np(layer(q, v))
    wq, wk, wv, wo = [w.numpy() for w in layer.weights]
    heads = []
    for h in range(2):
        qh, kh, vh = q @ wq[:, h], v @ wk[:, h], v @ wv[:, h]
        logits = qh @ kh.transpose(0, 2, 1) / np.sqrt(3)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        heads.append(weights @ vh @ wo[h])
    np.testing.assert_allclose(out, sum(heads), atol=1e-5)


def test_causality_property():
    """Changing tokens after position t never changes outputs at or before t."""
    for trial in range(5):
        t_len, dim = int(rng.integers(3, 9)), int(rng.integers(2, 6)) * 2
        layer = MultiHeadAttention(2, dim // 2)
        x = _randn(2, t_len, dim)
        t = int(rng.integers(0, t_len - 1))
        y = x.copy()
        y[:, t + 1 :] = _randn(2, t_len - t - 1, dim)
        out_x = _np(layer(x, x, use_causal_mask=True))
        out_y = _np(layer(y, y, use_causal_mask=True))
        np.testing.assert_allclose(out_x[:, : t + 1], out_y[:, : t + 1], atol=1e-6)
        assert not np.allclose(out_x[:, t + 1 :], out_y[:, t + 1 :])


def test_incremental_cache_equals_full_pass():
    layer = MultiHeadAttention(2, 4)
    x = _randn(3, 6, 8)
    full = _np(layer(x, x, use_causal_mask=True))
    cache = layer.init_cache(3, 6)
    steps = []
    for i in range(6):
        xi = x[:, i : i + 1]
        out, cache = layer(xi, xi, use_causal_mask=True, cache=cache, cache_update_index=i)
        steps.append(_np(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_cache_prefix_then_steps_and_cross_attention_cache():
    layer = MultiHeadAttention(2, 4)
    x, enc = _randn(2, 5, 8), _randn(2, 7, 8)
    full_self = _np(layer(x, x, use_causal_mask=True))
    cache = layer.init_cache(2, 5)
    first, cache = layer(x[:, :3], x[:, :3], use_causal_mask=True, cache=cache, cache_update_index=0)
    last, cache = layer(x[:, 3:], x[:, 3:], use_causal_mask=True, cache=cache, cache_update_index=3)
    np.testing.assert_allclose(np.concatenate([_np(first), _np(last)], 1), full_self, atol=1e-5)

    cross = layer.compute_cache(enc)
    out, same = layer(x, enc, cache=cross)
    np.testing.assert_allclose(_np(out), _np(layer(x, enc)), atol=1e-5)
    assert len(same) == 2 and all(a is b for a, b in zip(same, cross))  # read, not rewritten


def test_cache_holds_the_projected_keys_and_values():
    layer = MultiHeadAttention(2, 4)
    x, enc = _randn(2, 5, 8), _randn(2, 7, 8)
    layer(x, enc)
    keys, values = layer.compute_cache(enc)
    # NumPy: (B, S, d) x (d, N, H) + (N, H) -> (B, S, N, H), stored head-major (B, N, S, H).
    k = np.einsum("bsd,dnh->bnsh", _np(enc), _np(layer.key_dense.kernel)) + _np(layer.key_dense.bias)[:, None]
    v = np.einsum("bsd,dnh->bnsh", _np(enc), _np(layer.value_dense.kernel)) + _np(layer.value_dense.bias)[:, None]
    np.testing.assert_allclose(_np(keys), k, atol=1e-5)
    np.testing.assert_allclose(_np(values), v, atol=1e-5)
    empty_keys, empty_values = layer.init_cache(3, 6)
    assert tuple(empty_keys.shape) == tuple(empty_values.shape) == (3, 2, 6, 4)


def test_cache_must_be_a_pair_of_rank_4_tensors():
    layer = MultiHeadAttention(2, 4)
    x = _randn(2, 1, 8)
    layer(x, x)
    keys, values = layer.init_cache(2, 5)
    stacked = np.zeros((2, 2, 5, 2, 4), "float32")  # keras-hub's (B, 2, T, N, H) layout
    for bad, text in [(stacked, r"\w+ of shape \(2, 2, 5, 2, 4\)"), ((keys,), r"\[\(2, 2, 5, 4\)\]"),
                      ((keys, values[0]), r"\[\(2, 2, 5, 4\), \(2, 5, 4\)\]")]:
        with pytest.raises(ValueError, match="`cache` must be a pair.*Received: " + text):
            layer(x, x, cache=bad, cache_update_index=0)
    with pytest.raises(ValueError, match="needs a `cache`.*cache_update_index=0"):
        layer(x, x, cache_update_index=0)


def test_dropout_only_in_training():
    layer = MultiHeadAttention(2, 4, dropout=0.5, seed=3)
    x = _randn(2, 5, 8)
    np.testing.assert_allclose(_np(layer(x, x)), _np(layer(x, x, training=False)))
    assert not np.allclose(_np(layer(x, x, training=True)), _np(layer(x, x)))


def test_scaled_dot_product_attention_function():
    q, k, v = _randn(2, 3, 4), _randn(2, 5, 4), _randn(2, 5, 6)
    mask = np.ones((2, 3, 5), bool)
    mask[:, :, 3:] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    logits = q @ k.transpose(0, 2, 1) / 2.0
    logits[:, :, 3:] = -np.inf
    ref_w = np.exp(logits - logits.max(-1, keepdims=True))
    ref_w /= ref_w.sum(-1, keepdims=True)
    np.testing.assert_allclose(_np(w), ref_w, atol=1e-6)
    np.testing.assert_allclose(_np(out), ref_w @ v, atol=1e-5)


def test_float16_masks_do_not_overflow():
    layer = MultiHeadAttention(2, 4, dtype="mixed_float16")
    x = _randn(2, 5, 8) * 30.0
    out, scores = layer(
        x, x, value_mask=_padding_mask(2, 5), use_causal_mask=True, return_attention_scores=True
    )
    assert np.all(np.isfinite(_np(ops.cast(out, "float32"))))
    assert np.all(np.isfinite(_np(ops.cast(scores, "float32"))))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"num_heads": 0, "key_dim": 4}, "num_heads=0"),
        ({"num_heads": -2, "key_dim": 4}, "num_heads=-2"),
        ({"num_heads": 2, "key_dim": 0}, "key_dim=0"),
        ({"num_heads": 2, "key_dim": 4, "dropout": 1.5}, "dropout=1.5"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        MultiHeadAttention(**kwargs)


def test_bad_ranks_and_shapes():
    layer = MultiHeadAttention(2, 4)
    with pytest.raises(ValueError, match=r"query.shape=\(3, 8\)"):
        layer(_randn(3, 8), _randn(3, 5, 8))
    with pytest.raises(ValueError, match="rank 3"):
        scaled_dot_product_attention(_randn(2, 3), _randn(2, 3), _randn(2, 3))
    with pytest.raises(ValueError, match="same depth d_k"):
        scaled_dot_product_attention(_randn(2, 3, 4), _randn(2, 3, 5), _randn(2, 3, 5))
    with pytest.raises(ValueError, match="value_dim=3"):
        MultiHeadAttention(2, 4, value_dim=3).init_cache(1, 4)


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


@settings(max_examples=8 if keras.backend.backend() == "jax" else 16, deadline=None, derandomize=True, database=None)
@given(pads=st.lists(st.integers(0, 4), min_size=1, max_size=3), left=st.booleans(), seed=st.integers(0, 99))
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


def test_attention_masks_that_broadcast_are_taken_as_keras_takes_them():
    ours, theirs = _pair()
    q, v = _randn(3, 5, 8), _randn(3, 7, 6)
    for shape in ((3, 1, 7), (1, 1, 7), (3, 2, 5, 7)):
        mask = rng.random(shape) > 0.3
        mask[..., 0] = True
        np.testing.assert_allclose(_np(ours(q, v, attention_mask=mask)), _np(theirs(q, v, attention_mask=mask)),
                                   atol=1e-5)


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
