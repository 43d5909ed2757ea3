import keras
import numpy as np
import pytest

from keras import ops

from keras_attention.layers import MultiHeadAttention, scaled_dot_product_attention
from tests.test_case import gradients, one_shape_under_jax, run_layer_test

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

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
        t_len, dim = one_shape_under_jax((int(rng.integers(3, 9)), int(rng.integers(2, 6)) * 2), (8, 8))
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


def test_attention_masks_that_broadcast_are_taken_as_keras_takes_them():
    ours, theirs = _pair()
    q, v = _randn(3, 5, 8), _randn(3, 7, 6)
    for shape in ((3, 1, 7), (1, 1, 7), (3, 2, 5, 7)):
        mask = rng.random(shape) > 0.3
        mask[..., 0] = True
        np.testing.assert_allclose(_np(ours(q, v, attention_mask=mask)), _np(theirs(q, v, attention_mask=mask)),
                                   atol=1e-5)


def test_the_callers_tensors_keep_their_keras_masks_with_and_without_a_cache():
    # Keras' layer clears the masks of the tensors it is given; ours puts them back, for the next layer
    # that reads the same tensor.
    from keras.src.backend import get_keras_mask

    ids = np.array([[3, 4, 0], [5, 0, 0]], "int32")
    x = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    expected = ids != 0
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer(x, x)
    np.testing.assert_array_equal(_np(get_keras_mask(x)), expected)
    cache = layer.init_cache(2, 3)
    layer(x, x, cache=cache, cache_update_index=0)
    np.testing.assert_array_equal(_np(get_keras_mask(x)), expected)
