"""The results-table script runs (quick mode), skips finished runs and prints the table."""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import train_multi30k  # noqa: E402


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

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run must not train again")

    monkeypatch.setattr(train_multi30k, "train", no_training)
    train_multi30k.main(["--output", str(tmp_path), "--models", "bahdanau", "--directions", "de-en", "--quick"])
