"""Causal attention by query blocks (`attention_ops.scaled_dot_product_attention(causal=True)`)."""

import numpy as np
import pytest
from keras import ops

from keras_attention.layers import attention_ops

rng = np.random.default_rng(1)


def _randn(*shape):
    return rng.normal(size=shape).astype("float32")


def _reference(q, k, v, mask):
    """NumPy: causal softmax attention over heads-first arrays; a row with no visible key is uniform."""
    t_q, t_k = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., T_q, T_k)
    allowed = np.tril(np.ones((t_q, t_k), bool))
    if mask is not None:
        allowed = allowed & mask
    allowed = np.broadcast_to(allowed, scores.shape)
    scores = np.where(allowed, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True).clip(-1e30))
    weights = np.where(allowed, weights, 0.0)
    empty = ~allowed.any(-1, keepdims=True)
    weights = np.where(empty, 1.0 / t_k, weights / np.where(empty, 1.0, weights.sum(-1, keepdims=True)))
    return weights @ v, weights


def _heads_first(x):
    return np.transpose(x, (0, 2, 1, 3))  # (B, T, N, d) <-> (B, N, T, d)


MASKS = {
    "none": lambda b, t_q, t_k: None,
    # Left padding: the first keys of row 1 are hidden, so its first queries see no key at all.
    "keys, some rows empty": lambda b, t_q, t_k: (np.arange(t_k)[None, None, :] >= np.array([0, 6, 2])[:b, None, None]),
    "full (B, T_q, T_k)": lambda b, t_q, t_k: rng.random((b, t_q, t_k)) > 0.3,
    "(T_q, T_k)": lambda b, t_q, t_k: rng.random((t_q, t_k)) > 0.2,
}


@pytest.mark.parametrize("mask_name", sorted(MASKS))
@pytest.mark.parametrize("t_q, t_k", [(11, 11), (11, 9), (9, 13)])
@pytest.mark.parametrize("heads", [False, True])
def test_block_causal_attention_matches_numpy(monkeypatch, mask_name, t_q, t_k, heads):
    monkeypatch.setattr(attention_ops, "MIN_CAUSAL_QUERY_BLOCK", 4)  # 11 queries: blocks of 4, 4, 3
    batch = 3
    mask = MASKS[mask_name](batch, t_q, t_k)
    if heads:
        q, k, v = _randn(batch, t_q, 2, 4), _randn(batch, t_k, 2, 4), _randn(batch, t_k, 2, 5)
        ref_out, ref_w = _reference(_heads_first(q), _heads_first(k), _heads_first(v),
                                    None if mask is None else mask[..., None, :, :] if mask.ndim == 3 else mask)
        ref_out = _heads_first(ref_out)
    else:
        q, k, v = _randn(batch, t_q, 4), _randn(batch, t_k, 4), _randn(batch, t_k, 5)
        ref_out, ref_w = _reference(q, k, v, mask)
    out, w = attention_ops.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    np.testing.assert_allclose(ops.convert_to_numpy(w), ref_w, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)


def _count_blocks(monkeypatch):
    """Record, for every call of `_attend`, the key length of each of its tiles."""
    key_lengths = []
    attend = attention_ops._attend

    def counting(query, tiles, **kwargs):
        key_lengths.append([key.shape[1] for key, _, _ in tiles])
        return attend(query, tiles, **kwargs)

    monkeypatch.setattr(attention_ops, "_attend", counting)
    return key_lengths


def test_blocks_skip_the_keys_above_the_diagonal(monkeypatch):
    monkeypatch.setattr(attention_ops, "MIN_CAUSAL_QUERY_BLOCK", 4)  # 11 queries: blocks of 4, 4, 3
    key_lengths = _count_blocks(monkeypatch)
    q = _randn(2, 11, 4)
    attention_ops.scaled_dot_product_attention(q, q, q, causal=True)
    # Each block: the past keys (no mask needed) and the diagonal tile.
    assert key_lengths == [[4], [4, 4], [8, 3]]
    key_lengths.clear()
    attention_ops.scaled_dot_product_attention(q[:, :7], q[:, :7], q[:, :7], causal=True)
    assert key_lengths == [[7]]  # fewer than two blocks: one full computation
    key_lengths.clear()
    attention_ops.scaled_dot_product_attention(q, q, q, causal=False)
    assert key_lengths == [[11]]
    key_lengths.clear()
    attention_ops.scaled_dot_product_attention(q, q[:, :6], q[:, :6], causal=True)
    assert key_lengths == [[4], [4, 2], [6]]  # fewer keys than queries: the last block sees only the past


def test_blocks_with_dropout_in_training(monkeypatch):
    monkeypatch.setattr(attention_ops, "MIN_CAUSAL_QUERY_BLOCK", 4)  # 11 queries: blocks of 4, 4, 3
    q = _randn(2, 11, 4)
    out, _ = attention_ops.scaled_dot_product_attention(q, q, q, causal=True, dropout=0.5, training=True, seed=1)
    full, _ = attention_ops.scaled_dot_product_attention(q, q, q, causal=True)
    out, full = ops.convert_to_numpy(out), ops.convert_to_numpy(full)
    assert np.all(np.isfinite(out)) and not np.allclose(out, full)
    np.testing.assert_allclose(out[:, 0], 2.0 * q[:, 0] * (out[:, 0] != 0), atol=1e-5)  # one key: kept x 2 or dropped


def test_block_sizes():
    # Four blocks of at least 64 queries, from 128 queries on.
    assert [attention_ops.causal_query_block(n) for n in (1, 127, 128, 256, 512, 1000)] == [None, None, 64, 64, 128, 250]


def test_unknown_lengths_take_one_block(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(attention_ops, "MIN_CAUSAL_QUERY_BLOCK", 4)
    key_lengths = _count_blocks(monkeypatch)
    q = _randn(2, 11, 4)

    @tf.function(input_signature=[tf.TensorSpec((None, None, 4))])
    def attend(x):
        return attention_ops.scaled_dot_product_attention(x, x, x, causal=True)[0]

    ref_out, _ = _reference(q, q, q, None)
    np.testing.assert_allclose(attend(q).numpy(), ref_out, atol=1e-5)
    assert key_lengths == [[None]]


def test_blocks_in_float16_match_float32(monkeypatch):
    # The tiles' shared softmax runs in float32; float16 inputs give float32's result to float16 precision.
    monkeypatch.setattr(attention_ops, "MIN_CAUSAL_QUERY_BLOCK", 4)  # 11 queries: blocks of 4, 4, 3
    q, k, v = _randn(2, 11, 2, 4), _randn(2, 11, 2, 4), _randn(2, 11, 2, 4)
    mask = MASKS["keys, some rows empty"](2, 11, 11)
    half = [ops.cast(x, "float16") for x in (q, k, v)]
    out16, w16 = attention_ops.scaled_dot_product_attention(*half, mask=mask, causal=True)
    out32, w32 = attention_ops.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    assert out16.dtype == "float16" and w16.dtype == "float16"
    np.testing.assert_allclose(ops.convert_to_numpy(w16).astype("float32"), ops.convert_to_numpy(w32), atol=2e-3)
    np.testing.assert_allclose(ops.convert_to_numpy(out16).astype("float32"), ops.convert_to_numpy(out32), atol=1e-2)


@pytest.mark.parametrize("t_k, d_v, weights_first", [(6, 8, True), (8, 8, True), (9, 8, False)])
def test_normalisation_before_or_after_the_values_gives_the_same_attention(monkeypatch, t_k, d_v, weights_first):
    # The softmax's division goes to the smaller of the (T_q, T_k) weights and the (T_q, d_v) output.
    chosen = []
    decide = attention_ops._normalise_weights_first
    monkeypatch.setattr(attention_ops, "_normalise_weights_first", lambda *a: chosen.append(decide(*a)) or chosen[-1])
    q, k, v = _randn(2, 5, 2, 4), _randn(2, t_k, 2, 4), _randn(2, t_k, 2, d_v)
    mask = rng.random((2, 5, t_k)) > 0.3
    mask[..., 0] = True  # every row sees a key
    out, w = attention_ops.scaled_dot_product_attention(q, k, v, mask=mask)
    assert chosen == [weights_first]
    scores = _heads_first(q) @ np.swapaxes(_heads_first(k), -1, -2) / 2.0  # (B, N, T_q, T_k), d_k = 4
    scores = np.where(mask[:, None], scores, -np.inf)
    ref_w = np.exp(scores - scores.max(-1, keepdims=True))
    ref_w /= ref_w.sum(-1, keepdims=True)
    np.testing.assert_allclose(ops.convert_to_numpy(w), ref_w, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(out), _heads_first(ref_w @ _heads_first(v)), atol=1e-5)


@pytest.mark.parametrize("bias_shape", [None, (12,), (3, 4)])
def test_dense_project_matches_numpy(bias_shape):
    """`dense_project` over a rank-3 input, with a flat or per-head `(N, H)` bias, against NumPy."""
    x, kernel = _randn(2, 5, 6), _randn(6, 12)
    bias = None if bias_shape is None else _randn(*bias_shape)
    expected = x @ kernel + (0.0 if bias is None else bias.reshape(12))
    got = ops.convert_to_numpy(attention_ops.dense_project(x, kernel, bias))
    assert got.shape == (2, 5, 12)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
