import keras
import numpy as np
import pytest

from keras import ops

from keras_attention.models import PRESETS, Transformer
from tests.models import model_checks

SMALL = dict(num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0.0)


@pytest.mark.parametrize("normalize_first", model_checks.also_under_jax([False, True], [1]))
def test_learns_a_small_batch(normalize_first):
    model = Transformer(20, 20, normalize_first=normalize_first, **SMALL)
    model_checks.check_fits_to_near_zero_loss(model, epochs=120, learning_rate=3e-3)


def test_padding_does_not_change_loss():
    model_checks.check_padding_does_not_change_loss(Transformer(20, 20, **SMALL))


@pytest.mark.parametrize(
    "options",
    [{}, {"position": "learned", "normalize_first": True, "tie_output": False}, {"share_embeddings": True}],
)
def test_save_and_reload(tmp_path, options):
    model_checks.check_save_and_reload(Transformer(20, 20, **SMALL, **options), tmp_path)


def test_output_projection_is_tied_to_target_embedding():
    model = Transformer(20, 24, **SMALL)
    source, target_in, _ = model_checks.toy_batch()
    encoder_output, source_mask = model.encode(source)
    logits = ops.convert_to_numpy(model((source, target_in)))
    assert model.output_projection is None
    assert len(model.trainable_weights) == len({id(w) for w in model.trainable_weights})
    # Changing the target embedding table changes the logits through both uses.
    table = model.target_embedding.token_embedding.embeddings
    assert logits.shape == (8, 6, 24)
    assert table.shape == (24, 32)
    shared = Transformer(20, 20, share_embeddings=True, **SMALL)
    shared((source, target_in))
    assert shared.source_embedding is shared.target_embedding
    separate = Transformer(20, 20, **SMALL)
    separate((source, target_in))
    assert separate.count_params() - shared.count_params() == 20 * 32


def _attention_kernels(model):
    """{"query" / "key" / "value" / "attention_output": [kernels of every attention layer]}."""
    kernels = {}
    for w in model.weights:
        parts = w.path.split("/")
        if parts[-1] == "kernel" and parts[-3].endswith("attention"):
            kernels.setdefault(parts[-2], []).append(ops.convert_to_numpy(w))
    return kernels


@pytest.mark.parametrize("initializer", [None, "glorot_uniform"])
def test_attention_kernels_start_from_the_limits_worked_by_hand(initializer, tmp_path):
    """U(-a, a) has standard deviation a / sqrt(3). d=64, N=4, H=16:
    head-wise fans (N*d, H*d) = (256, 1024) for query, key and value, a = sqrt(6/1280);
    (N*H, N*d) = (64, 256) for the output, a = sqrt(6/320); Keras' true fans (64, 64), a = sqrt(6/128)."""
    keras.utils.set_random_seed(1)
    model = Transformer(20, 20, **{**SMALL, "d_model": 64}, attention_kernel_initializer=initializer)
    source, target_in, _ = model_checks.toy_batch()
    model((source, target_in))
    if initializer is None:
        limits = {"query": (6 / 1280) ** 0.5, "key": (6 / 1280) ** 0.5, "value": (6 / 1280) ** 0.5,
                  "attention_output": (6 / 320) ** 0.5}
    else:
        limits = dict.fromkeys(["query", "key", "value", "attention_output"], (6 / 128) ** 0.5)
    kernels = _attention_kernels(model)
    assert sorted(kernels) == sorted(limits) and all(len(k) == 2 * 2 + 2 for k in kernels.values())
    for name, limit in limits.items():
        values = np.concatenate([k.ravel() for k in kernels[name]])
        assert np.abs(values).max() <= limit, name
        np.testing.assert_allclose(values.std(), limit / 3**0.5, rtol=0.05, err_msg=name)
    assert not np.array_equal(kernels["query"][0], kernels["key"][0])  # each kernel drawn anew
    # The choice survives the config (and so `.keras` files).
    again = Transformer.from_config(model.get_config())
    assert again.attention_kernel_initializer.get_config() == model.attention_kernel_initializer.get_config()


def test_presets_follow_the_paper():
    base = Transformer.from_preset("base", 100, 100)
    assert (base.num_layers, base.d_model, base.num_heads, base.intermediate_dim, base.dropout) == (
        6, 512, 8, 2048, 0.1,
    )
    big = PRESETS["big"]
    assert (big["d_model"], big["num_heads"], big["intermediate_dim"], big["dropout"]) == (1024, 16, 4096, 0.3)
    tiny = Transformer.from_preset("tiny", 30, 40, dropout=0.0)
    assert tiny.dropout == 0.0 and tiny.num_layers == PRESETS["tiny"]["num_layers"]


def test_parameter_count_matches_formula():
    """Embeddings V*d each (output tied) + per block: attention 4(d^2+d), FFN, norms."""
    d, ff, v, layers = 32, 64, 20, 2
    model = Transformer(v, v, **SMALL)
    source, target_in, _ = model_checks.toy_batch()
    model((source, target_in))
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    norm = 2 * d
    encoder = attention + ffn + 2 * norm
    decoder = 2 * attention + ffn + 3 * norm
    assert model.count_params() == 2 * v * d + layers * (encoder + decoder)


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"d_model": 30, "num_heads": 4}, "d_model=30, num_heads=4"),
        ({"num_layers": 0}, "num_layers=0"),
        ({"position": "rope"}, "position='rope'"),
        ({"dropout": 1.0}, "dropout=1.0"),
    ],
)
def test_bad_arguments(kwargs, text):
    with pytest.raises(ValueError, match=text):
        Transformer(20, 20, **{**SMALL, **kwargs})


def test_bad_preset_and_shared_vocabulary():
    with pytest.raises(ValueError, match="preset='huge'"):
        Transformer.from_preset("huge", 10, 10)
    with pytest.raises(ValueError, match="source_vocab_size=10, target_vocab_size=12"):
        Transformer(10, 12, share_embeddings=True, **SMALL)


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("tie_output", [True, False])
def test_a_quantized_model_gives_the_float_logits_up_to_rounding_and_decodes_step_by_step(tie_output, mode):
    """`Model.quantize` (Keras' int8 or int4 weights, activations rounded per call): the logits stay the float
    model's up to that rounding, the tied projection reading the target embedding's table de-quantized; the
    cached decoding steps give the quantized model's own full pass."""
    model = Transformer(20, 24, **SMALL, tie_output=tie_output)
    source, target_in, _ = model_checks.toy_batch()
    expected = ops.convert_to_numpy(model((source, target_in)))
    model_checks.quantize(model, mode)
    assert model.target_embedding.token_embedding.quantization_mode == mode
    quantized = ops.convert_to_numpy(model((source, target_in)))
    error = np.abs(quantized - expected).max() / np.ptp(expected)
    assert error < (0.05 if mode == "int8" else 0.25), error
    model_checks.check_decode_steps_match_full_pass(model)
