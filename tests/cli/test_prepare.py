"""`keras-attention prepare` then `train --data-dir PREPARED`; data errors as one line, no traceback."""

import json
import re

import pytest

from keras_attention.cli import main
from keras_attention.data import generate_dates


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """1,200 generated date pairs as two files, and 100 for validation and test."""
    folder = tmp_path_factory.mktemp("cli_prepare")
    for name, n, seed in (("train", 1200, 1), ("valid", 100, 2)):
        sources, targets = generate_dates(n, seed=seed)
        (folder / f"{name}.src").write_text("".join(s + "\n" for s in sources))
        (folder / f"{name}.tgt").write_text("".join(t + "\n" for t in targets))
    return folder


def test_prepare_then_train_on_the_shards(corpus, tmp_path, capsys):
    prepared = tmp_path / "prepared"
    files = ["--dataset", "files", "--train-files", str(corpus / "train.src"), str(corpus / "train.tgt"),
             "--valid-files", str(corpus / "valid.src"), str(corpus / "valid.tgt"),
             "--test-files", str(corpus / "valid.src"), str(corpus / "valid.tgt")]
    assert main(["prepare", *files, "--vocab-size", "200", "--max-length", "24", "--shard-size", "400",
                 "--output", str(prepared)]) == 0
    manifest = json.loads((prepared / "manifest.json").read_text())
    assert len(manifest["shards"]) == 3 and manifest["counts"]["read"] == 1200
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("prepared: "))
    assert "; read 1,200, skipped " in summary and not re.search(r" 0(,|$)", summary), summary  # no zeros
    assert main(["prepare", *files, "--output", str(prepared)]) == 2  # never replaced silently
    assert "already holds a prepared corpus" in capsys.readouterr().err
    # What prepare fixed cannot be changed when training on it.
    assert main(["train", "--data-dir", str(prepared), "--vocab-size", "300", "--source", "fr",
                 "--output", str(tmp_path / "refused")]) == 2
    assert "--source, --vocab-size: fixed by the prepared corpus in" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()
    run = tmp_path / "run"
    assert main(["train", "--data-dir", str(prepared), "--preset", "tiny", "--epochs", "1",
                 "--batch-size", "32", "--no-jit", "--bleu-sample", "0", "--output", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == results["steps_per_epoch"] > 0
    assert results["data"].startswith("prepared corpus")
    assert results["test"]["num_sentences"] == 100


def test_data_errors_are_one_line(corpus, tmp_path, capsys):
    # In this process: what a separate one adds (exit code, no TensorFlow lines) is tests/cli/test_bad_input.py's.
    def run_cli(*args):
        return main(list(args)), capsys.readouterr().err

    short = tmp_path / "short.tgt"
    short.write_text("".join((corpus / "train.tgt").read_text().splitlines(True)[:-1]))
    code, err = run_cli("train", "--dataset", "files", "--train-files", str(corpus / "train.src"),
                        str(short), "--output", str(tmp_path / "a"))
    assert code == 2 and "Traceback" not in err
    assert f"{corpus / 'train.src'} has 1200 lines, {short} has 1199 lines" in err.splitlines()[-1]
    bad = tmp_path / "bad.src"
    lines = (corpus / "train.src").read_bytes().split(b"\n")
    lines[700] = b"\xff\xfe"
    bad.write_bytes(b"\n".join(lines))
    code, err = run_cli("prepare", "--dataset", "files", "--train-files", str(bad),
                        str(corpus / "train.tgt"), "--strict-data", "--vocab-size", "200",
                        "--output", str(tmp_path / "p"))
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(f"{bad} line 701: not valid UTF-8")
    assert not (tmp_path / "p").exists()  # nothing left behind
