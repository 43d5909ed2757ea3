"""End to end on the generated dates corpus: the recipe's models really learn (exact match >= 95%).

Each run stops as soon as it has learned: every `CHECK_EVERY` training steps the
translator decodes 200 validation dates, and training ends once it matches 97% of
them (the epochs below are the most it may take). The model at that point must then
match 95% of 400 test dates it never saw.
"""

import keras
import numpy as np
import pytest

from keras_attention import data
from keras_attention.training import corpus, recipe
from keras_attention.training.recipe import TrainConfig, train

THRESHOLD = 0.95
STOP_AT = 0.97  # on validation, so that the test set is judged with a margin
CHECK_EVERY = 40  # training steps between two validation checks
CASES = {
    "bahdanau": dict(overrides={"units": 96, "embedding_dim": 32}, epochs=6, learning_rate=5e-3),
    # Luong (general score, input feeding) on Bahdanau's budget: same sizes, steps and rate.
    "luong": dict(overrides={"units": 96, "embedding_dim": 32}, epochs=6, learning_rate=5e-3),
    "transformer": dict(
        overrides={"num_layers": 2, "d_model": 64, "num_heads": 4, "intermediate_dim": 128, "dropout": 0.0},
        # The recipe's warm-up, then half a cosine to zero at the end of epoch 6: it learns in about 600 steps.
        epochs=6,
        peak_learning_rate=5e-3,
        lr_schedule="cosine",
    ),
}


def _pairs(n, split):
    return [(s.decode(), t.decode()) for s, t in data.load_dates(n, split).as_numpy_iterator()]


def _exact_match(translator, pairs):
    outputs = translator([s for s, _ in pairs])
    return float(np.mean([o == t for o, (_, t) in zip(outputs, pairs)]))


class StopWhenLearned(keras.callbacks.Callback):
    """Ends `fit` at the first check (every `CHECK_EVERY` steps) whose validation exact match reaches `STOP_AT`."""

    def __init__(self, translator, pairs):
        super().__init__()
        self.translator, self.pairs, self.history, self.steps = translator, pairs, [], 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps % CHECK_EVERY == 0 and not self.model.stop_training:
            self.history.append(_exact_match(self.translator, self.pairs))
            self.model.stop_training = self.history[-1] >= STOP_AT


_build_tokenizers = corpus.build_tokenizers
_TOKENIZERS = {}


def _tokenizers_learned_once(data_config, train_pairs, total):
    """`build_tokenizers`, once per data configuration: the cases share one data set (about 2.5 s a time)."""
    key = repr(data_config)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = _build_tokenizers(data_config, train_pairs, total)
    return _TOKENIZERS[key]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_reaches_exact_match_threshold(kind, tmp_path, monkeypatch):
    stops = []

    def callbacks_and_a_stop(config, prepared, translator, *args):
        callbacks, *rest = run_callbacks(config, prepared, translator, *args)
        stops.append(StopWhenLearned(translator, _pairs(200, "val")))
        return [*callbacks, stops[-1]], *rest

    run_callbacks = recipe._callbacks
    monkeypatch.setattr(recipe, "_callbacks", callbacks_and_a_stop)
    monkeypatch.setattr(corpus, "build_tokenizers", _tokenizers_learned_once)
    config = TrainConfig.from_flat(
        model=kind, preset="tiny", dataset="dates", vocab_size=200, target_vocab_size=40, max_length=48,
        batch_size=64,
        max_train_examples=8000, max_test_examples=200, bleu_sample=0, label_smoothing=0.0, jit_compile=False,
        vocab_sample=2000,  # the vocabularies from a quarter of the dates: their pieces are all common
        output_dir=str(tmp_path), **CASES[kind],
    )
    translator, results = train(config, verbose=0)
    (stop,) = stops
    exact = _exact_match(translator, _pairs(400, "test"))
    print(f"{kind}: exact match {exact:.3f} after {len(stop.history) * CHECK_EVERY} steps, "
          f"{results['train_seconds']} s (validation {stop.history})")
    assert exact >= THRESHOLD, stop.history
    assert results["test"]["num_sentences"] == 200
    assert (tmp_path / "translator" / "model.keras").exists()
