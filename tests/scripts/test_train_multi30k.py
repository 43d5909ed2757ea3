"""The results-table script runs (quick mode), scores, skips finished runs and prints the table."""

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keras_attention.decoding.translator import Translator

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import train_multi30k  # noqa: E402

pytestmark = pytest.mark.xdist_group("train_multi30k")  # one worker: the quick run is trained once


def _no_training(*args, **kwargs):
    raise AssertionError("a finished run must not train again")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, multi30k_dir):
    """One quick run (2 epochs, tiny model) shared by the tests: (argv, run folder, rows, stdout)."""
    output = tmp_path_factory.mktemp("multi30k")
    argv = ["--output", str(output), "--models", "bahdanau", "--directions", "de-en", "--quick"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rows = train_multi30k.main(argv)
    return argv, output / "bahdanau-de-en", rows, printed.getvalue()


def test_quick_run_records_and_prints(quick_run):
    _, run, rows, out = quick_run
    results = json.loads((run / "results.json").read_text())
    assert rows[0][2] == results and results["test"]["num_sentences"] == train_multi30k.QUICK_TEST_SENTENCES
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent).stdout.strip()
    assert results["commit"].rstrip("+") == (head or "unknown")  # recorded when the run started
    history = results["history"]
    assert results["train_seconds"] == round(sum(history["epoch_seconds"]), 1) > 0
    # Each epoch's validation loss and BLEU: a part of its time, summed.
    assert all(0 < v + b < e for v, b, e in zip(history["validation_seconds"], history["bleu_seconds"],
                                                history["epoch_seconds"]))
    assert results["evaluation_seconds"] == round(sum(history["validation_seconds"]) + sum(history["bleu_seconds"]), 1)
    assert "| bahdanau | de-en |" in out and f"| {results['commit']} |" in out
    bleu = lambda key: f"{results[key]['bleu']:.1f} / {results[key]['bleu_lowercase']:.1f}"  # noqa: E731
    moses = results["test_average_beam4"]["bleu_moses_lowercase"]  # fairseq's measure, a column of its own
    assert f"| {bleu('test')} | {bleu('test_beam4')} | {bleu('test_average_beam4')} | {moses:.1f} |" in out
    minutes = f"{results['train_seconds'] / 60:.0f} min, {results['evaluation_seconds'] / 60:.0f} validating"
    assert f"| {minutes} |" in out


def test_scores_beam_search_and_averaged_checkpoints(quick_run):
    _, run, _, _ = quick_run
    results = json.loads((run / "results.json").read_text())
    assert results["averaged_checkpoints"] == ["epoch-001.weights.h5", "epoch-002.weights.h5"]
    for key in ("test_beam4", "test_average", "test_average_beam4"):
        assert results[key]["num_sentences"] == train_multi30k.QUICK_TEST_SENTENCES and 0 <= results[key]["bleu"] <= 100
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


def test_the_number_of_checkpoints_averaged_is_chosen_on_the_validation_set(quick_run, tmp_path):
    import shutil

    _, run, _, _ = quick_run
    folder = tmp_path / run.name
    shutil.copytree(run, folder)
    results = json.loads((folder / "results.json").read_text())
    limit = train_multi30k.QUICK_TEST_SENTENCES
    with contextlib.redirect_stdout(io.StringIO()):
        assert train_multi30k.score_more(str(folder), results, "de", "en", limit=limit, counts=(1, 2, 5))
    selection = results["average_selection"]
    assert selection["split"] == "val" and set(selection["bleu"]) == {"1", "2"}  # 5: more than the run kept
    best = max(selection["bleu"].values())
    assert selection["chosen"] == min(int(n) for n, b in selection["bleu"].items() if b == best)
    # The average of the last one is that epoch's weights: scored here without averaging, it gives the same BLEU.
    translator = Translator.load(str(run / "translator"))
    translator.model.load_weights(str(run / "checkpoints" / "epoch-002.weights.h5"))
    pairs = train_multi30k._pairs("de", "en", "val", limit)
    assert train_multi30k.evaluate_bleu(translator, pairs)["bleu"] == pytest.approx(selection["bleu"]["1"], abs=0.01)
    # The test scores are those of the chosen average, recomputed.
    names = [f"epoch-{e:03d}.weights.h5" for e in (1, 2)][-selection["chosen"]:]
    assert results["averaged_checkpoints"] == names
    epochs = []
    for name in names:
        translator.model.load_weights(str(run / "checkpoints" / name))
        epochs.append([np.array(w) for w in translator.model.get_weights()])
    averaged = Translator.load(str(folder / "translator-average")).model.get_weights()
    for mean, *weights in zip(averaged, *epochs):
        np.testing.assert_allclose(mean, sum(weights) / len(weights), rtol=1e-6, atol=1e-7)
    assert results["test_average_beam4"]["num_sentences"] == limit
    assert not train_multi30k.score_more(str(folder), results, "de", "en", limit=limit, counts=(1, 2, 5))  # all there


def test_a_tie_on_validation_goes_to_fewer_checkpoints(monkeypatch):
    averaged = []
    monkeypatch.setattr(train_multi30k, "average_translator", lambda src, paths, out, overwrite: averaged.append(paths))
    monkeypatch.setattr(train_multi30k.Translator, "load", staticmethod(lambda path: None))
    scores = iter([30.0, 31.0, 31.0])  # for the last 5, 10 and 20
    monkeypatch.setattr(train_multi30k, "evaluate_bleu", lambda translator, pairs: {"bleu_lowercase": next(scores)})
    checkpoints = [f"epoch-{e:03d}.weights.h5" for e in range(1, 21)]
    with contextlib.redirect_stdout(io.StringIO()):
        selection = train_multi30k.choose_average("t", checkpoints, (20, 5, 10), "out/avg", [], lower_case=True)
    assert [len(paths) for paths in averaged] == [5, 10, 20] and averaged[0] == checkpoints[-5:]
    assert selection == {"split": "val", "measure": "BLEU, lower-cased, greedy",
                         "bleu": {"5": 30.0, "10": 31.0, "20": 31.0}, "chosen": 10}


def test_the_length_penalty_is_chosen_on_the_validation_set_with_the_final_model(quick_run, tmp_path):
    import shutil

    _, run, _, _ = quick_run
    folder = tmp_path / run.name
    shutil.copytree(run, folder)
    results = json.loads((folder / "results.json").read_text())
    before = dict(results)
    limit = train_multi30k.QUICK_TEST_SENTENCES
    with contextlib.redirect_stdout(io.StringIO()):
        assert train_multi30k.score_more(str(folder), results, "de", "en", limit=limit, penalties=(0.0, 5.0))
    selection = results["length_penalty_selection"]
    assert selection["split"] == "val" and set(selection["bleu"]) == {"0", "5"}
    # Each score is the averaged model's beam 4 with that penalty on the validation set, decoded here again.
    average = Translator.load(str(folder / "translator-average"))
    val = train_multi30k._pairs("de", "en", "val", limit)
    for alpha in (0.0, 5.0):
        bleu = train_multi30k.evaluate_bleu(average, val, method="beam", beam_size=4, length_penalty=alpha)["bleu"]
        assert bleu == pytest.approx(selection["bleu"][f"{alpha:g}"], abs=0.01)
    best = max(selection["bleu"].values())
    assert selection["chosen"] == min(float(a) for a, b in selection["bleu"].items() if b == best)
    # Both beam scores are made again with the chosen penalty; the greedy ones stay.
    test = train_multi30k._pairs("de", "en", "test_2016_flickr", limit)
    beam = train_multi30k.evaluate_bleu(average, test, method="beam", beam_size=4, length_penalty=selection["chosen"])
    assert results["test_average_beam4"]["bleu"] == pytest.approx(beam["bleu"])
    assert results["test"] == before["test"] and results["test_average"] == before["test_average"]
    assert not train_multi30k.score_more(str(folder), results, "de", "en", limit=limit, penalties=(0.0, 5.0))


def test_a_tie_on_validation_goes_to_the_smaller_length_penalty(monkeypatch):
    asked = []

    def fake_bleu(translator, pairs, options):
        assert options.method == "beam" and options.beam_size == 4
        asked.append(options.length_penalty)
        return {"bleu": {0.6: 30.0, 1.0: 31.0, 2.0: 31.0}[options.length_penalty]}

    monkeypatch.setattr(train_multi30k, "evaluate_bleu", fake_bleu)
    with contextlib.redirect_stdout(io.StringIO()):
        selection = train_multi30k.choose_length_penalty(None, (2.0, 0.6, 1.0), [], lower_case=False)
    assert asked == [0.6, 1.0, 2.0]
    assert selection == {"split": "val", "measure": "BLEU, beam 4", "bleu": {"0.6": 30.0, "1": 31.0, "2": 31.0},
                         "chosen": 1.0}


def test_finished_run_is_not_trained_again_but_gets_missing_scores(quick_run, monkeypatch):
    argv, run, _, _ = quick_run
    results = json.loads((run / "results.json").read_text())
    del results["test_average_beam4"]  # as if written before the script scored it
    signature = results["test"].pop("bleu_signature")  # as if scored before signatures were kept
    (run / "results.json").write_text(json.dumps(results))
    monkeypatch.setattr(train_multi30k, "train", _no_training)
    with contextlib.redirect_stdout(io.StringIO()):
        rows = train_multi30k.main(argv)
    assert rows[0][2]["test_average_beam4"]["num_sentences"] == train_multi30k.QUICK_TEST_SENTENCES
    assert "test_average_beam4" in json.loads((run / "results.json").read_text())
    again = rows[0][2]["test"]  # the same scores, signed (and with fairseq's measure, as the others have)
    assert {k: again[k] for k in results["test"]} == results["test"] and again["bleu_signature"] == signature
    assert rows[0][2]["test_beam4"] == results["test_beam4"]  # the rest as it was


def test_bad_data_is_one_line_not_a_traceback(tmp_path):
    """Multi30k files whose languages differ in length: the script names them in one line and exits 2."""
    folder = tmp_path / "data" / "multi30k"
    folder.mkdir(parents=True)
    for split in ("train", "val", "test_2016_flickr"):
        (folder / f"{split}.en.gz").write_bytes(gzip.compress(b"a dog\na cat\n"))
        (folder / f"{split}.de.gz").write_bytes(gzip.compress(b"ein Hund\n"))
    script = Path(train_multi30k.__file__)
    done = subprocess.run(
        [sys.executable, str(script), "--output", str(tmp_path / "runs"), "--models", "bahdanau",
         "--directions", "en-de", "--quick"],
        capture_output=True, text=True, env={**os.environ, "KERAS_ATTENTION_DATA": str(tmp_path / "data")},
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("train_multi30k: error: Parallel files must have the same number of lines")
    assert "train.en.gz has 2 lines" in last


def test_the_documented_command_line_trains_the_transformer_tiny_recipe():
    """The training guide's `keras-attention train` command for `transformer-tiny` builds the run the script
    makes."""
    import shlex

    from keras_attention.cli.arguments import build_parser
    from keras_attention.cli.configs import config_from_args
    from keras_attention.training.config import TrainConfig

    guide = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    start = guide.index("keras-attention train --model transformer --preset tiny")
    end = guide.index("\n", guide.index("--output", start))
    argv = shlex.split(guide[start:end].replace("\\\n", " "))[1:]
    # de->en as the guide says: swap --source and --target, pass its own flags (argparse keeps the last).
    de_en = "--vocab-size 8000 --lr-schedule cosine --epochs 55"
    swapped = {"en": "de", "de": "en"}
    reverse = [swapped.get(word, word) if argv[i - 1] in ("--source", "--target") else word
               for i, word in enumerate(argv)] + de_en.split()
    assert f"(en->de; for de->en swap `--source` and\n`--target` and pass `{de_en}`)" in guide
    for direction, words in (("en-de", argv), ("de-en", reverse)):
        from_docs = config_from_args(build_parser().parse_args(words))
        source, target = direction.split("-")
        recipe = TrainConfig.from_flat(source=source, target=target, output_dir=from_docs.run.output_dir,
                                       **train_multi30k.recipe("transformer-tiny", direction)).flat()
        differences = {name: (value, recipe[name]) for name, value in from_docs.flat().items() if value != recipe[name]}
        assert differences == {}, direction


@pytest.mark.parametrize("direction", train_multi30k.DIRECTIONS)
def test_the_transformer_tiny_recipe_keeps_case(direction):
    """The best recipe writes cased text: neither its data nor its vocabulary is lower-cased."""
    from keras_attention.training.config import TrainConfig

    config = TrainConfig.from_flat(source=direction[:2], target=direction[3:], output_dir="run",
                                   **train_multi30k.recipe("transformer-tiny", direction))
    assert config.data.lower_case is False
