import re

import keras
import numpy as np
import pytest

from keras import ops

from keras_attention.layers.bahdanau_attention import BahdanauAttention
from tests.test_case import run_layer_test

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

B, T_Q, T_V, D_Q, D_K, D_V, UNITS = 2, 3, 5, 4, 3, 6, 7


def _data(seed=0, query_rank=3):
    rng = np.random.default_rng(seed)
    query_shape = (B, T_Q, D_Q) if query_rank == 3 else (B, D_Q)
    query = rng.normal(size=query_shape).astype("float32")
    value = rng.normal(size=(B, T_V, D_V)).astype("float32")
    key = rng.normal(size=(B, T_V, D_K)).astype("float32")
    mask = np.array([[True] * T_V, [True, True, True, False, False]])
    return query, value, key, mask


def _randomize(layer, seed=1):
    """Non-default weights, so g and b of the normalised score are tested too."""
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(size=w.shape).astype("float32") for w in layer.get_weights()])


def bahdanau_reference(layer, query, value, key, mask):
    """The paper's formulas in float64 NumPy from the layer's weights."""
    w_q = layer.query_kernel.numpy().astype("float64")
    w_k = layer.key_kernel.numpy().astype("float64")
    v = layer.score_vector.numpy().astype("float64")
    q = query[:, None] if query.ndim == 2 else query  # (B, T_q, d_q)
    hidden = (q @ w_q)[:, :, None, :] + (key @ w_k)[:, None, :, :]  # (B, T_q, T_v, U)
    if layer.normalize:
        hidden = hidden + layer.score_bias.numpy()
        v = float(layer.score_scale.numpy()) * v / np.linalg.norm(v)
    e = np.tanh(hidden) @ v  # (B, T_q, T_v)
    e = np.where(mask[:, None, :], e, -np.inf)
    alpha = np.exp(e - e.max(-1, keepdims=True))
    alpha = alpha / alpha.sum(-1, keepdims=True)
    context = alpha @ value  # (B, T_q, d_v)
    if query.ndim == 2:
        return context[:, 0], alpha[:, 0]
    return context, alpha


@pytest.mark.parametrize("normalize", [False, True])
def test_layer_harness(normalize, tmp_path):
    query, value, key, mask = _data()
    run_layer_test(
        BahdanauAttention,
        {"units": UNITS, "normalize": normalize},
        {"query": query, "value": value, "key": key, "value_mask": mask},
        ((B, T_Q, D_V), (B, T_Q, T_V)) if normalize else (B, T_Q, D_V),
        call_kwargs={"return_attention_scores": normalize},
        tmp_path=tmp_path,
    )


def test_layer_harness_rank2_query(tmp_path):
    query, value, _, mask = _data(query_rank=2)
    run_layer_test(
        BahdanauAttention,
        {"units": UNITS},
        {"query": query, "value": value, "value_mask": mask},
        ((B, D_V), (B, T_V)),
        call_kwargs={"return_attention_scores": True},
        tmp_path=tmp_path,
    )


def test_return_attention_scores_shapes():
    query, value, key, mask = _data()
    layer = BahdanauAttention(UNITS)
    context, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    assert tuple(context.shape) == (B, T_Q, D_V)
    assert tuple(weights.shape) == (B, T_Q, T_V)
    context, weights = layer(query[:, 0], value, key, value_mask=mask, return_attention_scores=True)
    assert tuple(context.shape) == (B, D_V)
    assert tuple(weights.shape) == (B, T_V)
    assert {w.path.split("/")[-1] for w in layer.weights} == {
        "query_kernel",
        "key_kernel",
        "score_vector",
    }


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("query_rank", [2, 3])
def test_matches_numpy_reference(normalize, query_rank):
    query, value, key, mask = _data(query_rank=query_rank)
    layer = BahdanauAttention(UNITS, normalize=normalize)
    layer(query, value, key, value_mask=mask)
    _randomize(layer)
    if normalize:
        assert {w.path.split("/")[-1] for w in layer.weights} >= {"score_scale", "score_bias"}
    context, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    ref_context, ref_weights = bahdanau_reference(layer, query, value, key, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_weights, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(context), ref_context, atol=1e-5)


def test_normalize_initial_values():
    layer = BahdanauAttention(UNITS, normalize=True)
    query, value, _, _ = _data()
    layer(query, value)
    np.testing.assert_allclose(layer.score_scale.numpy(), np.sqrt(1.0 / UNITS), rtol=1e-6)
    np.testing.assert_array_equal(layer.score_bias.numpy(), np.zeros(UNITS))


def test_padded_keys_get_zero_weight_and_rows_sum_to_one():
    query, value, key, mask = _data()
    layer = BahdanauAttention(UNITS, normalize=True)
    _, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    weights = ops.convert_to_numpy(weights)
    assert np.all(weights[1, :, ~mask[1]] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)


def test_keras_mask_fills_value_mask():
    tokens = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]])
    embedding = keras.layers.Embedding(10, D_V, mask_zero=True)
    value = embedding(tokens)
    query = _data()[0]
    layer = BahdanauAttention(UNITS)
    auto = layer(query, value, return_attention_scores=True)[1]
    explicit = layer(query, value, value_mask=tokens != 0, return_attention_scores=True)[1]
    np.testing.assert_array_equal(ops.convert_to_numpy(auto), ops.convert_to_numpy(explicit))
    assert np.all(ops.convert_to_numpy(auto)[1, :, 3:] == 0.0)


def test_rank2_query_equals_rank3_with_one_step():
    query, value, key, mask = _data()
    layer = BahdanauAttention(UNITS, normalize=True)
    c3, w3 = layer(query[:, :1], value, key, value_mask=mask, return_attention_scores=True)
    c2, w2 = layer(query[:, 0], value, key, value_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(c2), ops.convert_to_numpy(c3)[:, 0], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(w2), ops.convert_to_numpy(w3)[:, 0], atol=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
def test_projected_keys_give_the_same_result(normalize):
    query, value, key, mask = _data()
    layer = BahdanauAttention(UNITS, normalize=normalize)
    expected = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    projected = layer.project_keys(key)
    assert tuple(projected.shape) == (B, T_V, UNITS)
    for t in range(T_Q):  # one decoder step at a time, keys projected once
        step = layer(
            query[:, t],
            value,
            value_mask=mask,
            projected_keys=projected,
            return_attention_scores=True,
        )
        for got, want in zip(step, expected):
            np.testing.assert_allclose(
                ops.convert_to_numpy(got), ops.convert_to_numpy(want)[:, t], atol=1e-6
            )


def test_project_keys_needs_a_built_layer():
    with pytest.raises(ValueError, match="build"):
        BahdanauAttention(UNITS).project_keys(_data()[2])


@pytest.mark.parametrize("units", [0, -3, 2.5])
def test_bad_units(units):
    with pytest.raises(ValueError, match=f"units={units}"):
        BahdanauAttention(units)


@pytest.mark.parametrize(
    "query_shape, value_shape, key_shape, pattern",
    [
        ((B, 1, T_Q, D_Q), (B, T_V, D_V), None, r"query.shape=\(2, 1, 3, 4\)"),
        ((B, T_Q, D_Q), (B, D_V), None, r"value.shape=\(2, 6\)"),
        ((B, T_Q, D_Q), (B, T_V, D_V), (B, T_V + 1, D_K), r"key.shape=\(2, 6, 3\)"),
        ((B + 1, T_Q, D_Q), (B, T_V, D_V), None,
         r"`query` and `value` must have the same batch size. Received: query.shape=\(3, 3, 4\), "
         r"value.shape=\(2, 5, 6\)"),
    ],
)
def test_bad_shapes(query_shape, value_shape, key_shape, pattern):
    query = np.zeros(query_shape, "float32")
    value = np.zeros(value_shape, "float32")
    key = None if key_shape is None else np.zeros(key_shape, "float32")
    with pytest.raises(ValueError, match=pattern):
        BahdanauAttention(UNITS)(query, value, key)


def test_a_value_mask_of_the_wrong_shape_is_named_with_its_shape():
    query, value, _, _ = _data()
    with pytest.raises(ValueError, match=re.escape(f"`value_mask` must have shape ({B}, {T_V}). "
                                                   f"Received: value_mask.shape=({B}, {T_V + 1})")):
        BahdanauAttention(UNITS)(query, value, value_mask=np.ones((B, T_V + 1), bool))


def test_weights_come_out_of_a_functional_model():
    encoder_states, decoder_states = keras.Input((T_V, D_V)), keras.Input((T_Q, D_Q))
    context, weights = BahdanauAttention(UNITS)(decoder_states, encoder_states, return_attention_scores=True)
    model = keras.Model([decoder_states, encoder_states], [context, weights])
    query, value, _, _ = _data()
    got_context, got_weights = model.predict([query, value], verbose=0)
    assert got_context.shape == (B, T_Q, D_V) and got_weights.shape == (B, T_Q, T_V)
    np.testing.assert_allclose(got_weights.sum(-1), 1.0, atol=1e-5)
