"""The results-table script runs (quick mode), skips finished runs and prints the table."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from keras_attention.decoding.translator import Translator

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import train_multi30k  # noqa: E402


def _no_training(*args, **kwargs):
    raise AssertionError("a finished run must not train again")


def test_quick_run_then_resume_skips(tmp_path, capsys, monkeypatch):
    rows = train_multi30k.main(["--output", str(tmp_path), "--models", "bahdanau", "--directions", "de-en", "--quick"])
    results = json.loads((tmp_path / "bahdanau-de-en" / "results.json").read_text())
    assert rows[0][2] == results and results["test"]["num_sentences"] == 1000
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent).stdout.strip()
    assert results["commit"].rstrip("+") == (head or "unknown")  # recorded when the run started
    assert results["train_seconds"] == round(sum(results["history"]["epoch_seconds"]), 1) > 0
    out = capsys.readouterr().out
    assert "| bahdanau | de-en |" in out and f"| {results['commit']} |" in out
    monkeypatch.setattr(train_multi30k, "train", _no_training)
    train_multi30k.main(["--output", str(tmp_path), "--models", "bahdanau", "--directions", "de-en", "--quick"])


def test_scores_beam_search_and_averaged_checkpoints(tmp_path, capsys, monkeypatch):
    argv = ["--output", str(tmp_path), "--models", "bahdanau", "--directions", "en-de", "--quick"]
    train_multi30k.main(argv)
    run = tmp_path / "bahdanau-en-de"
    results = json.loads((run / "results.json").read_text())
    assert results["averaged_checkpoints"] == ["epoch-001.weights.h5", "epoch-002.weights.h5"]
    for key in ("test_beam4", "test_average", "test_average_beam4"):
        assert results[key]["num_sentences"] == 1000 and 0 <= results[key]["bleu"] <= 100
    # The averaged translator holds the mean of the two epochs' weights, worked out here
    # by loading each checkpoint into the trained model.
    model = Translator.load(str(run / "translator")).model
    epochs = []
    for name in results["averaged_checkpoints"]:
        model.load_weights(str(run / "checkpoints" / name))
        epochs.append([np.array(w) for w in model.get_weights()])
    averaged = Translator.load(str(run / "translator-average")).model.get_weights()
    assert any(not np.array_equal(a, b) for a, b in zip(*epochs))  # two different epochs
    for first, second, mean in zip(*epochs, averaged):
        np.testing.assert_allclose(mean, (first + second) / 2, rtol=1e-6, atol=1e-7)
    out = capsys.readouterr().out
    bleu = lambda key: f"{results[key]['bleu']:.1f} / {results[key]['bleu_lowercase']:.1f}"  # noqa: E731
    assert f"| {bleu('test')} | {bleu('test_beam4')} | {bleu('test_average_beam4')} |" in out

    # An older results.json without a score gets it on the next pass, without training.
    del results["test_average_beam4"]
    (run / "results.json").write_text(json.dumps(results))
    monkeypatch.setattr(train_multi30k, "train", _no_training)
    rows = train_multi30k.main(argv)
    assert rows[0][2]["test_average_beam4"]["num_sentences"] == 1000
    assert "test_average_beam4" in json.loads((run / "results.json").read_text())
