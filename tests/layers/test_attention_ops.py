"""`attention_ops.scaled_dot_product_attention` against NumPy and `keras.ops.dot_product_attention`."""

import numpy as np
import pytest
from keras import ops

from keras_attention.layers import attention_ops

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

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
def test_causal_attention_matches_numpy(mask_name, t_q, t_k, heads):
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


def test_dropout_in_training_only():
    q = _randn(2, 11, 4)
    out, _ = attention_ops.scaled_dot_product_attention(q, q, q, causal=True, dropout=0.5, training=True, seed=1)
    full, _ = attention_ops.scaled_dot_product_attention(q, q, q, causal=True)
    inference, _ = attention_ops.scaled_dot_product_attention(q, q, q, causal=True, dropout=0.5, seed=1)
    out, full = ops.convert_to_numpy(out), ops.convert_to_numpy(full)
    assert np.all(np.isfinite(out)) and not np.allclose(out, full)
    np.testing.assert_allclose(ops.convert_to_numpy(inference), full)
    np.testing.assert_allclose(out[:, 0], 2.0 * q[:, 0] * (out[:, 0] != 0), atol=1e-5)  # one key: kept x 2 or dropped


def test_float16_matches_float32():
    # The softmax runs in float32; float16 inputs give float32's result to float16 precision.
    q, k, v = _randn(2, 11, 2, 4), _randn(2, 11, 2, 4), _randn(2, 11, 2, 4)
    mask = MASKS["keys, some rows empty"](2, 11, 11)
    half = [ops.cast(x, "float16") for x in (q, k, v)]
    out16, w16 = attention_ops.scaled_dot_product_attention(*half, mask=mask, causal=True)
    out32, w32 = attention_ops.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    assert out16.dtype == "float16" and w16.dtype == "float16"
    np.testing.assert_allclose(ops.convert_to_numpy(w16).astype("float32"), ops.convert_to_numpy(w32), atol=2e-3)
    np.testing.assert_allclose(ops.convert_to_numpy(out16).astype("float32"), ops.convert_to_numpy(out32), atol=1e-2)


def test_same_as_the_fused_keras_op_without_weights():
    """Where `keras.ops.dot_product_attention` computes the same thing, the outputs agree."""
    q, k, v = _randn(2, 6, 2, 4), _randn(2, 9, 2, 4), _randn(2, 9, 2, 4)
    mask = rng.random((2, 1, 6, 9)) > 0.3
    mask[..., 0] = True
    ours, _ = attention_ops.scaled_dot_product_attention(q, k, v, mask=mask)
    fused = ops.dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(ours), ops.convert_to_numpy(fused), atol=1e-5)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((2, 5), (2, 5), (2, 5)), "rank 3"),
        (((2, 5, 4), (2, 5, 3), (2, 5, 4)), "same depth"),
    ],
)
def test_bad_shapes_name_what_was_received(shapes, message):
    with pytest.raises(ValueError, match=message):
        attention_ops.scaled_dot_product_attention(*(_randn(*shape) for shape in shapes))
