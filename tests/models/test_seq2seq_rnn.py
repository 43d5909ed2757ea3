import numpy as np
import pytest

from keras import ops

from keras_attention.models import Seq2SeqRNN
from tests.models import model_checks

VARIANTS = [
    {"attention": None},
    {"attention": "bahdanau"},
    {"attention": "luong"},
    {"attention": "luong", "luong_score": "concat", "luong_window": 2, "cell": "lstm"},
    {"attention": "bahdanau", "cell": "lstm", "bidirectional_encoder": False},
]
SMALL = dict(embedding_dim=16, units=32, dropout=0.0)


def _ids(options):
    return "-".join(f"{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("options", model_checks.also_under_jax(VARIANTS[:3], [1]), ids=_ids)
def test_learns_a_small_batch(options):
    model_checks.check_fits_to_near_zero_loss(Seq2SeqRNN(20, 20, **SMALL, **options), epochs=150)


@pytest.mark.parametrize("options", model_checks.also_under_jax(VARIANTS, [0, 1, 3]), ids=_ids)
def test_decode_steps_match_full_pass(options):
    model_checks.check_decode_steps_match_full_pass(Seq2SeqRNN(20, 20, **SMALL, **options))


@pytest.mark.parametrize("options", VARIANTS[1:3], ids=_ids)
def test_padding_does_not_change_loss(options):
    model_checks.check_padding_does_not_change_loss(Seq2SeqRNN(20, 20, **SMALL, **options))


@pytest.mark.parametrize("options", [VARIANTS[0], VARIANTS[3]], ids=_ids)
def test_save_and_reload(tmp_path, options):
    model_checks.check_save_and_reload(Seq2SeqRNN(20, 20, **SMALL, **options), tmp_path)


def test_attention_weights_cover_real_source_tokens_only():
    model = Seq2SeqRNN(20, 20, attention="bahdanau", **SMALL)
    source, target_in, _ = model_checks.toy_batch()
    _, weights = model((source, target_in), return_attention=True)
    weights = ops.convert_to_numpy(weights)  # (B, T, S)
    assert weights.shape == (8, 6, 7)
    padded = np.broadcast_to((source == 0)[:, None, :], weights.shape)
    assert np.all(weights[padded] == 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_fixed_vector_model_sees_source_only_through_its_summary():
    """Without attention, two sources with the same bridge vector give the same logits."""
    model = Seq2SeqRNN(20, 20, attention=None, **SMALL)
    source, target_in, _ = model_checks.toy_batch()
    carry, constants = model.encode(source)
    assert set(constants) == {"encoder_output", "source_mask", "summary"}
    logits, weights = model((source, target_in), return_attention=True)
    assert weights is None


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"attention": "additive"}, "attention='additive'"),
        ({"cell": "rnn"}, "cell='rnn'"),
        ({"units": 0}, "units=0"),
        ({"dropout": -0.5}, "dropout=-0.5"),
    ],
)
def test_bad_arguments(kwargs, text):
    with pytest.raises(ValueError, match=text):
        Seq2SeqRNN(20, 20, **{**SMALL, **kwargs})


def test_scaled_luong_equals_unscaled_with_a_smaller_general_kernel():
    """Scores / sqrt(units) == the unscaled model with W_a / sqrt(units)."""
    source, target_in, _ = model_checks.toy_batch()
    scaled = Seq2SeqRNN(20, 20, attention="luong", **SMALL)
    unscaled = Seq2SeqRNN(20, 20, attention="luong", luong_scaled=False, **SMALL)
    assert scaled.attention_layer.scaled and not unscaled.attention_layer.scaled
    scaled((source, target_in))
    unscaled((source, target_in))
    for a, b in zip(scaled.weights, unscaled.weights):
        value = a.numpy()
        b.assign(value / np.sqrt(SMALL["units"]) if a is scaled.attention_layer.general_kernel else value)
    np.testing.assert_allclose(
        ops.convert_to_numpy(scaled((source, target_in))),
        ops.convert_to_numpy(unscaled((source, target_in))),
        atol=1e-5,
    )


def test_configs_saved_before_luong_scaled_load_unscaled():
    config = Seq2SeqRNN(20, 20, attention="luong", **SMALL).get_config()
    assert config["luong_scaled"] is True
    del config["luong_scaled"]
    assert not Seq2SeqRNN.from_config(config).attention_layer.scaled


def test_from_preset_builds_the_named_size_with_overrides():
    from keras_attention.models.seq2seq_rnn import RNN_PRESETS

    model = Seq2SeqRNN.from_preset("small", 30, 40, attention="bahdanau", dropout=0.0)
    assert (model.embedding_dim, model.units, model.dropout) == (256, 256, 0.0)  # the preset, one override
    assert model.attention == "bahdanau" and RNN_PRESETS["small"]["dropout"] == 0.2
    assert Seq2SeqRNN.from_preset("tiny", 30, 40).get_config()["units"] == 128
    with pytest.raises(ValueError, match=r"`preset` must be one of 'tiny', 'small', 'base', 'big'\. Received: "):
        Seq2SeqRNN.from_preset("huge", 30, 40)
