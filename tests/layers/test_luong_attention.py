import numpy as np
import pytest

import keras
from keras import ops

from keras_attention.layers.luong_attention import LuongAttention
from tests.test_case import fewer_under_jax, gradients, run_layer_test

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

B, T_Q, T_V, D_Q, D_V, UNITS = 2, 3, 9, 4, 5, 6
LENGTHS = np.array([T_V, 6])

CONFIGS = {
    "dot": {"score": "dot"},
    "general": {"score": "general"},
    "concat": {"score": "concat", "units": UNITS},
    "dot_scale": {"score": "dot", "scale": True},
    "general_local": {"score": "general", "window": 2},
    "general_scaled": {"score": "general", "scaled": True},
    "dot_scaled_scale_local": {"score": "dot", "scaled": True, "scale": True, "window": 2},
    "concat_scale_local": {"score": "concat", "scale": True, "window": 1},
}


def _data(seed=0, query_rank=3, d_k=D_Q):
    rng = np.random.default_rng(seed)
    query_shape = (B, T_Q, D_Q) if query_rank == 3 else (B, D_Q)
    query = rng.normal(size=query_shape).astype("float32")
    value = rng.normal(size=(B, T_V, D_V)).astype("float32")
    key = rng.normal(size=(B, T_V, d_k)).astype("float32")
    mask = np.arange(T_V)[None, :] < LENGTHS[:, None]  # (B, T_V), padding at the end
    return query, value, key, mask


def _built_layer(config, query, value, key, mask, seed=1):
    """A layer with random non-default weights (a scale other than one, ...)."""
    layer = LuongAttention(**config)
    layer(query, value, key, value_mask=mask)
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(size=w.shape).astype("float32") for w in layer.get_weights()])
    return layer


def _numpy(weight):
    return None if weight is None else weight.numpy().astype("float64")


def reference_position(layer, query, mask):
    """Equation (9): p_t = S sigmoid(v_p^T tanh(W_p h_t)), S the source length."""
    logits = np.tanh(query @ _numpy(layer.position_kernel)) @ _numpy(layer.position_vector)
    return mask.sum(-1)[:, None] / (1.0 + np.exp(-logits))  # (B, T_q)


def luong_reference(layer, query, value, key, mask):
    """Equations (7), (8), (10) in float64 NumPy from the layer's weights."""
    query, value, key = (x.astype("float64") for x in (query, value, key))
    if layer.score == "dot":
        e = query @ key.transpose(0, 2, 1)  # (B, T_q, T_v)
    elif layer.score == "general":
        e = np.einsum("bqi,ij,bkj->bqk", query, _numpy(layer.general_kernel).T, key)
    else:  # v_a^T tanh(W_a [h_t; hbar_s]) with the concatenation really built
        pairs = np.concatenate(
            [
                np.broadcast_to(query[:, :, None, :], (B, T_Q, T_V, query.shape[-1])),
                np.broadcast_to(key[:, None, :, :], (B, T_Q, T_V, key.shape[-1])),
            ],
            axis=-1,
        )
        e = np.tanh(pairs @ _numpy(layer.concat_kernel)) @ _numpy(layer.score_vector)
    if layer.scaled:  # divided by sqrt(d_q), worked out here from the query
        e = e / np.sqrt(query.shape[-1])
    if layer.scale:
        e = e * float(layer.score_scale.numpy())
    allowed = np.broadcast_to(mask[:, None, :], e.shape)
    gaussian = 1.0
    if layer.window is not None:
        p = reference_position(layer, query, mask)[..., None]  # (B, T_q, 1)
        s = np.arange(T_V)[None, None, :]
        allowed = allowed & (np.abs(s - p) <= layer.window)
        gaussian = np.exp(-((s - p) ** 2) / (2 * (layer.window / 2) ** 2))
    e = np.where(allowed, e, -np.inf)
    a = np.exp(e - e.max(-1, keepdims=True))
    a = a / a.sum(-1, keepdims=True) * gaussian
    return a @ value, a


# Under JAX the harness takes the two configurations that hold every score option (the NumPy reference
# below checks each configuration's ops there).
@pytest.mark.parametrize("name", fewer_under_jax(sorted(CONFIGS), ["concat_scale_local", "dot_scaled_scale_local"]))
def test_layer_harness(name, tmp_path):
    query, value, key, mask = _data()
    run_layer_test(
        LuongAttention,
        CONFIGS[name],
        {"query": query, "value": value, "key": key, "value_mask": mask},
        ((B, T_Q, D_V), (B, T_Q, T_V)) if "local" in name else (B, T_Q, D_V),
        call_kwargs={"return_attention_scores": "local" in name},
        tmp_path=tmp_path,
        expect_trainable_weights=name != "dot",  # plain dot scores have no weights
    )


def test_layer_harness_rank2_query(tmp_path):
    query, value, _, mask = _data(query_rank=2)
    run_layer_test(
        LuongAttention,
        {"score": "concat", "window": 2},
        {"query": query, "value": value, "value_mask": mask},
        ((B, D_V), (B, T_V)),
        call_kwargs={"return_attention_scores": True},
        tmp_path=tmp_path,
    )


def test_return_attention_scores_shapes():
    query, value, key, mask = _data()
    layer = LuongAttention("concat", window=2)
    context, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    assert (tuple(context.shape), tuple(weights.shape)) == ((B, T_Q, D_V), (B, T_Q, T_V))
    context, weights = layer(query[:, 0], value, key, value_mask=mask, return_attention_scores=True)
    assert (tuple(context.shape), tuple(weights.shape)) == ((B, D_V), (B, T_V))
    assert layer.concat_kernel.shape == (2 * D_Q, D_Q)  # units defaults to d_q
    assert layer.position_kernel.shape == (D_Q, D_Q)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_numpy_reference(name):
    d_k = D_Q if CONFIGS[name]["score"] == "dot" else 3
    query, value, key, mask = _data(d_k=d_k)
    layer = _built_layer(CONFIGS[name], query, value, key, mask)
    context, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    ref_context, ref_weights = luong_reference(layer, query, value, key, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), ref_weights, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(context), ref_context, atol=1e-5)


@pytest.mark.parametrize("name", ["dot", "general", "concat", "dot_scale"])
def test_global_weights_sum_to_one_over_valid_keys(name):
    query, value, key, mask = _data()
    layer = LuongAttention(**CONFIGS[name])
    _, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    weights = ops.convert_to_numpy(weights)
    assert np.all(weights[1, :, ~mask[1]] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("window", [1, 2])
def test_local_weights_vanish_outside_the_window(window):
    query, value, key, mask = _data()
    query = query * 3.0  # spread p_t over the whole source
    layer = _built_layer({"score": "general", "window": window}, query, value, key, mask)
    _, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    weights = ops.convert_to_numpy(weights)

    p = reference_position(layer, query, mask)  # (B, T_q)
    outside = np.abs(np.arange(T_V)[None, None, :] - p[..., None]) > window
    assert outside.any()
    assert np.all(weights[outside] == 0.0)
    assert np.all(weights[1, :, ~mask[1]] == 0.0)
    assert np.all(weights.sum(-1) <= 1.0 + 1e-6)  # the Gaussian only down-weights

    position = ops.convert_to_numpy(layer.predicted_position(query, value, value_mask=mask))
    np.testing.assert_allclose(position, p, atol=1e-5)
    assert np.all(position >= 0.0) and np.all(position <= LENGTHS[:, None])
    no_mask = ops.convert_to_numpy(layer.predicted_position(query, value))
    assert np.all(no_mask >= 0.0) and np.all(no_mask <= T_V)


@pytest.mark.parametrize("name", ["general", "concat_scale_local", "general_local"])
def test_rank2_query_equals_rank3_with_one_step(name):
    query, value, key, mask = _data(d_k=3)
    layer = _built_layer(CONFIGS[name], query, value, key, mask)
    c3, w3 = layer(query[:, :1], value, key, value_mask=mask, return_attention_scores=True)
    c2, w2 = layer(query[:, 0], value, key, value_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(c2), ops.convert_to_numpy(c3)[:, 0], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(w2), ops.convert_to_numpy(w3)[:, 0], atol=1e-6)


@pytest.mark.parametrize("name", ["dot", "general", "concat_scale_local"])
def test_projected_keys_give_the_same_result(name):
    d_k = D_Q if name == "dot" else 3
    query, value, key, mask = _data(d_k=d_k)
    layer = _built_layer(CONFIGS[name], query, value, key, mask)
    expected = layer(query, value, key, value_mask=mask, return_attention_scores=True)
    projected = layer.project_keys(key)
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


def test_gradients_reach_the_position_network():
    query, value, key, mask = _data()
    layer = LuongAttention("dot", window=2)
    layer(query, value, key, value_mask=mask)
    loss = lambda: ops.sum(ops.square(layer(query, value, key, value_mask=mask)))  # noqa: E731
    grads = gradients(loss, [], [layer.position_kernel, layer.position_vector])
    for grad in grads:
        grad = ops.convert_to_numpy(grad)
        assert np.all(np.isfinite(grad)) and np.any(grad != 0.0)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"score": "cosine"}, "score='cosine'"),
        ({"window": 0}, "window=0"),
        ({"window": 1.5}, "window=1.5"),
        ({"units": 0}, "units=0"),
        ({"score": "concat", "scaled": True}, 'scaled=True, score="concat"'),
    ],
)
def test_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        LuongAttention(**kwargs)


@pytest.mark.parametrize(
    "score, query_shape, value_shape, pattern",
    [
        ("dot", (B, T_Q, D_Q), (B, T_V, D_V), r"query.shape=\(2, 3, 4\), key.shape=\(2, 9, 5\)"),
        ("general", (B, 1, T_Q, D_Q), (B, T_V, D_V), r"query.shape=\(2, 1, 3, 4\)"),
        ("general", (B, T_Q, D_Q), (B, D_V), r"value.shape=\(2, 5\)"),
    ],
)
def test_bad_shapes(score, query_shape, value_shape, pattern):
    query = np.zeros(query_shape, "float32")
    value = np.zeros(value_shape, "float32")
    with pytest.raises(ValueError, match=pattern):
        LuongAttention(score)(query, value)


def test_batch_sizes_that_differ_are_named_in_a_call_and_in_a_functional_model():
    message = r"`query`, `value` and `key` must have the same batch size. Received: query.shape=\(3, "
    with pytest.raises(ValueError, match=message):
        LuongAttention("general")(*(np.zeros((b, 4, 6), "float32") for b in (3, 2, 2)))
    with pytest.raises(ValueError, match=r"`query` and `value` must have the same batch size"):
        LuongAttention("general")(keras.Input((4, 6), batch_size=3), keras.Input((4, 6), batch_size=2))
