"""The Transformer's step-by-step decoding (`models/transformer_decoding.py`): cached steps against the full
pass, the shared-cache beam layout against a repeated state, and the error before the model is built."""

import keras
import numpy as np
import pytest

from keras_attention.models import Transformer
from tests.models import model_checks

SMALL = dict(num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0.0)


@pytest.mark.parametrize("normalize_first", model_checks.also_under_jax([False, True], [1]))
def test_cached_steps_match_full_pass(normalize_first):
    model = Transformer(20, 20, normalize_first=normalize_first, **SMALL)
    model_checks.check_decode_steps_match_full_pass(model)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_beam_layout_equals_repeated_and_gathered_state(normalize_first):
    """Steps in the shared-cache beam layout, with random reorderings in between,
    give the logits and attention of the plain layout whose whole state is
    repeated K times and gathered by the parents at every step."""
    model = Transformer(40, 50, num_layers=2, d_model=16, num_heads=2, intermediate_dim=32,
                        normalize_first=normalize_first, max_length=16)
    rng = np.random.default_rng(1)
    source = rng.integers(1, 40, size=(3, 7)).astype("int32")
    source[0, 4:] = 0  # padding
    model((source, source[:, :2]))
    batch, beam, steps = 3, 4, 6
    plain = model.init_decoding_state(source, steps)
    plain = {k: _map(lambda t: np.repeat(np.asarray(t), beam, axis=0), v) for k, v in plain.items()}
    shared = model.init_beam_state(source, steps, beam)
    tokens = rng.integers(1, 50, size=(batch * beam,)).astype("int32")
    for index in range(steps):
        logits_a, plain, attention_a = model.decode_step(plain, tokens, index)
        logits_b, shared, attention_b = model.decode_step(shared, tokens, index)
        np.testing.assert_allclose(np.asarray(logits_b), np.asarray(logits_a), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.asarray(attention_b), np.asarray(attention_a), atol=1e-5)
        parents = rng.integers(0, beam, size=(batch, beam)).astype("int32")  # any slot may continue any
        flat = (np.arange(batch)[:, None] * beam + parents).reshape(-1)
        plain = {k: _map(lambda t: np.take(np.asarray(t), flat, axis=0), v) for k, v in plain.items()}
        shared = model.reorder_beam_state(shared, parents)
        tokens = rng.integers(1, 50, size=(batch * beam,)).astype("int32")
    # The source side is kept once per row, not once per hypothesis.
    assert tuple(shared["cross_cache"][0][0].shape)[0] == batch and tuple(shared["encoder_output"].shape)[0] == batch


def _map(fn, structure):
    return keras.tree.map_structure(fn, structure)


def test_step_by_step_decoding_of_an_unbuilt_model_is_one_clear_error():
    model = Transformer(20, 20, num_layers=1, d_model=8, num_heads=2, intermediate_dim=16)
    source = np.array([[2, 5, 6, 3]])
    for start in (lambda: model.init_decoding_state(source, 5), lambda: model.init_beam_state(source, 5, 2)):
        with pytest.raises(ValueError, match="no decoder weights yet: call it once on a batch"):
            start()
    model((source, source))  # built: the same calls now work
    assert model.init_decoding_state(source, 5)["self_cache"][0][0].shape[2] == 5  # (B, N, T_max, H)
