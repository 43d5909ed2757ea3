import math

import keras
import keras_hub
import numpy as np
import pytest

from keras import ops

from keras_attention.layers import MultiHeadAttention, PositionalEmbedding, SinusoidalPositionEncoding
from tests.test_case import run_layer_test

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

rng = np.random.default_rng(0)


def _ids(batch=3, length=6, vocab=20):
    ids = rng.integers(1, vocab, size=(batch, length)).astype("int32")
    ids[1, 4:] = 0
    ids[2, 2:] = 0
    return ids


def test_sinusoidal_values_worked_by_hand():
    """d = 4: features are sin(p), cos(p), sin(p / 100), cos(p / 100)."""
    out = ops.convert_to_numpy(SinusoidalPositionEncoding()(np.zeros((1, 51, 4), "float32")))[0]
    for pos in (0, 1, 7, 50):
        expected = [math.sin(pos), math.cos(pos), math.sin(pos / 100), math.cos(pos / 100)]
        np.testing.assert_allclose(out[pos], expected, atol=1e-5)


def test_sinusoidal_matches_formula_and_keras_hub():
    d = 16
    out = ops.convert_to_numpy(SinusoidalPositionEncoding()(np.zeros((2, 30, d), "float32")))
    pos = np.arange(30)[:, None]
    i = np.arange(d)[None, :] // 2
    angle = pos / np.power(10000.0, 2 * i / d)
    formula = np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))
    np.testing.assert_allclose(out[0], formula, atol=1e-5)
    np.testing.assert_allclose(out[1], formula, atol=1e-5)
    hub = ops.convert_to_numpy(keras_hub.layers.SinePositionEncoding()(np.zeros((2, 30, d), "float32")))
    np.testing.assert_allclose(out, hub, atol=1e-5)


def test_sinusoidal_start_index_is_a_slice_of_the_full_table():
    layer = SinusoidalPositionEncoding()
    full = ops.convert_to_numpy(layer(np.zeros((1, 12, 8), "float32")))
    part = ops.convert_to_numpy(layer(np.zeros((1, 3, 8), "float32"), start_index=7))
    np.testing.assert_allclose(part, full[:, 7:10], atol=1e-6)


def test_sinusoidal_harness(tmp_path):
    run_layer_test(
        SinusoidalPositionEncoding,
        {"max_wavelength": 500.0},
        {"inputs": rng.normal(size=(2, 5, 6)).astype("float32")},
        expected_output_shape=(2, 5, 6),
        expect_trainable_weights=False,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("position", ["sinusoidal", "learned"])
def test_positional_embedding_harness(tmp_path, position):
    run_layer_test(
        PositionalEmbedding,
        {"vocab_size": 20, "d_model": 8, "max_length": 16, "position": position, "mask_zero": True},
        {"inputs": _ids()},
        expected_output_shape=(3, 6, 8),
        tmp_path=tmp_path,
    )


def test_embedding_is_scaled_by_sqrt_d_model_plus_positions():
    layer = PositionalEmbedding(vocab_size=20, d_model=8)
    ids = _ids()
    out = ops.convert_to_numpy(layer(ids))
    table = layer.token_embedding.embeddings.numpy()
    positions = ops.convert_to_numpy(SinusoidalPositionEncoding()(np.zeros((1, 6, 8), "float32")))[0]
    np.testing.assert_allclose(out, table[ids] * math.sqrt(8) + positions, atol=1e-5)
    unscaled = PositionalEmbedding(vocab_size=20, d_model=8, scale=False, position="learned")
    out = ops.convert_to_numpy(unscaled(ids))
    expected = unscaled.token_embedding.embeddings.numpy()[ids] + unscaled.position_embeddings.numpy()[:6]
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_start_index_for_decoding():
    for position in ("sinusoidal", "learned"):
        layer = PositionalEmbedding(vocab_size=20, d_model=8, position=position)
        ids = _ids()
        full = ops.convert_to_numpy(layer(ids))
        step = ops.convert_to_numpy(layer(ids[:, 4:5], start_index=4))
        np.testing.assert_allclose(step, full[:, 4:5], atol=1e-6)


def test_mask_flows_to_attention():
    """Padding from mask_zero reaches the attention layer: padded keys get no weight."""
    ids_in = keras.Input((6,), dtype="int32")
    x = PositionalEmbedding(vocab_size=20, d_model=8, mask_zero=True)(ids_in)
    _, scores = MultiHeadAttention(2, 4)(x, x, return_attention_scores=True)
    model = keras.Model(ids_in, scores)
    ids = _ids()
    scores = ops.convert_to_numpy(model(ids))  # (B, N, T, T)
    padded_keys = np.broadcast_to((ids == 0)[:, None, None, :], scores.shape)
    valid_rows = np.broadcast_to((ids != 0)[:, None, :, None], scores.shape)
    assert np.all(scores[padded_keys & valid_rows] == 0.0)


def test_bad_arguments_and_too_long_input():
    for kwargs, text in [
        ({"vocab_size": 0, "d_model": 8}, "vocab_size=0"),
        ({"vocab_size": 10, "d_model": -1}, "d_model=-1"),
        ({"vocab_size": 10, "d_model": 8, "position": "rotary"}, "position='rotary'"),
        ({"vocab_size": 10, "d_model": 8, "max_length": 0}, "max_length=0"),
    ]:
        with pytest.raises(ValueError, match=text):
            PositionalEmbedding(**kwargs)
    with pytest.raises(ValueError, match="max_wavelength=0"):
        SinusoidalPositionEncoding(max_wavelength=0)
    layer = PositionalEmbedding(vocab_size=10, d_model=4, max_length=5, position="learned")
    with pytest.raises(ValueError, match="max_length`=5"):
        layer(np.ones((2, 6), "int32"))


def test_token_ids_must_be_integers():
    layer = PositionalEmbedding(vocab_size=20, d_model=8)
    with pytest.raises(ValueError, match="`inputs` must hold integer token ids. Received: inputs with dtype float32"):
        layer(_ids().astype("float32"))


@pytest.mark.parametrize("position", ["sinusoidal", "learned"])
def test_a_sequence_past_max_length_is_refused(position):
    layer = PositionalEmbedding(vocab_size=20, d_model=8, max_length=5, position=position)
    with pytest.raises(ValueError, match=r"must be at most `max_length`=5. Received: inputs.shape=\(3, 6\), "
                                         r"start_index=0"):
        layer(_ids())
    for start in (3, np.int64(3), keras.ops.convert_to_tensor(3)):
        with pytest.raises(ValueError, match="start_index=3"):
            layer(_ids()[:, :3], start_index=start)


def test_a_missing_argument_is_named_as_python_names_it():
    message = r"PositionalEmbedding\(\) missing required keyword argument\(s\): 'vocab_size'"
    with pytest.raises(TypeError, match=message):
        PositionalEmbedding(d_model=32)


def test_positional_arguments_are_refused_as_keras_hub_orders_them_otherwise():
    with pytest.raises(TypeError, match=r"vocab_size, d_model as keywords.*Received positional arguments: \(100, 16\)"):
        PositionalEmbedding(100, 16)
