"""Every verb of the command line, fed bad input: one error line, exit code 2, nothing changed.

Each row of `CASES` is a command line (built in a folder that holds a
trained translator, a finished run, data files and an export), the words
its one stderr line must contain, and the folders that must come out
byte-identical. The cases call `main` in this process (an exception that
escapes it fails the test as a traceback would); one case also runs as a
real process, with TensorFlow's own log level unset, as a user's shell runs it.
"""

import gzip
import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from keras_attention.cli import main
from tests.conftest import TINY_TRAINING, copy_with_languages

pytestmark = pytest.mark.xdist_group("cli_bad_input")  # one worker: the world is built once

TRAIN = TINY_TRAINING  # the shared run's model and training options


def snapshot(folder):
    files = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return files


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_run):
    """A finished run, its translator (and damaged copies), an export, and small corpora with defects."""
    root = tmp_path_factory.mktemp("bad_input")
    run = root / "run"
    shutil.copytree(tiny_run, run)
    translator = run / "translator"
    for name, damage in [("truncated", "model"), ("broken_json", "json")]:
        copy = root / name
        shutil.copytree(translator, copy)
        if damage == "model":
            data = (copy / "model.keras").read_bytes()
            (copy / "model.keras").write_bytes(data[: len(data) // 3])
        else:
            (copy / "translator.json").write_text('{"max_source_length": 32,\n  "source_tokenizer": [')
    copy_with_languages(translator, root / "fr_en", "fr", "en")  # dates record no languages
    assert main(["export", str(translator), str(root / "served"), "--method", "greedy"]) == 0
    text = root / "text"
    text.mkdir()
    (text / "a.en").write_text("one dog\ntwo cats\nthree birds\n")
    (text / "a.de").write_text("ein Hund\nzwei Katzen\n")  # one line short
    (text / "b.en").write_text("one dog\ntwo cats\n")
    (text / "b.de").write_bytes(b"ein Hund\nzwei \xff Katzen\n")
    (text / "c.en").write_text("one dog\n\n")
    (text / "c.de").write_text("ein Hund\nzwei Katzen\n")
    whole = gzip.compress(("ein Hund\n" * 2000).encode())
    (text / "d.en").write_text("one dog\n" * 2000)
    (text / "d.de.gz").write_bytes(whole[: len(whole) // 2])
    (root / "busy").mkdir()
    (root / "busy" / "notes.txt").write_text("mine")
    (root / "avg.weights.h5").write_bytes(b"someone's file")
    return root


def files(world, name):
    return ["--dataset", "files", "--train-files", *(str(world / "text" / f) for f in name)]


CASES = [
    # (id, command line from the world folder, words in the one error line, folders that must not change)
    ("translate a missing folder", lambda w: ["translate", str(w / "nothing"), "hi"], "translator.json", []),
    ("translate a truncated model", lambda w: ["translate", str(w / "truncated"), "hi"],
     "model.keras: not a valid Keras archive", ["truncated"]),
    ("translate broken json", lambda w: ["translate", str(w / "broken_json"), "hi"],
     "translator.json: invalid JSON (line 2", ["broken_json"]),
    ("translate top-p 0", lambda w: ["translate", str(w / "run" / "translator"), "hi", "--top-p", "0"],
     "argument --top-p: must be a number in (0, 1]. Received: 0", []),
    ("translate a seed beyond int32", lambda w: ["translate", str(w / "run"), "hi", "--method", "sample",
                                                 "--seed", str(2**31)],
     "argument --seed: must be an integer in [0, 2147483647]. Received: 2147483648", []),
    ("translate a length penalty that overflows", lambda w: ["translate", str(w / "run"), "hi", "--method", "beam",
                                                             "--length-penalty", "1e308"],
     "argument --length-penalty: must be a number in [0, 10]. Received: 1e308", []),
    ("train with a batch size and a token budget", lambda w: ["train", "--batch-size", "32", "--batch-tokens",
                                                              "2000", "--output", str(w / "new")],
     "--batch-size and --batch-tokens both set the batch: give one", []),
    ("train on files without --dataset files", lambda w: ["train", "--train-files", str(w / "text" / "b.en"),
                                                          str(w / "text" / "b.en"), "--output", str(w / "new")],
     "--train-files: your own files are read with --dataset files (or tsv): add it", ["text"]),
    ("evaluate a TFDS name without --dataset tfds", lambda w: ["evaluate", str(w / "run"), "--tfds-name", "x/y"],
     "--tfds-name is read with --dataset tfds: add it", ["run"]),
    ("translate a translator.json", lambda w: ["translate", str(w / "run" / "translator" / "translator.json"), "hi"],
     "translator.json is a file: give the translator's folder", ["run"]),
    ("translate a sample's attention", lambda w: ["translate", str(w / "run"), "3 May 2001", "--method", "sample",
                                                  "--plot-attention", str(w / "a.png")],
     "--plot-attention shows the attention of greedy or beam decoding. Received: --method sample", ["run"]),
    ("evaluate the wrong languages", lambda w: ["evaluate", str(w / "fr_en"), "--dataset", "dates",
                                                "--source", "de", "--target", "en"],
     "translates fr->en; --source de contradicts it", ["fr_en"]),
    ("train into a finished run", lambda w: ["train", *TRAIN, "--dataset", "dates", "--output", str(w / "run")],
     "already holds a run", ["run"]),
    ("train epochs 0", lambda w: ["train", "--epochs", "0", "--output", str(w / "run")],
     "argument --epochs: must be an integer >= 1. Received: 0", ["run"]),
    ("train a negative learning rate", lambda w: ["train", "--learning-rate", "-1", "--output", str(w / "new")],
     "argument --learning-rate: must be a number > 0", []),
    ("train an RNN with a peak rate", lambda w: ["train", "--model", "bahdanau", "--peak-learning-rate", "0.002",
                                                 "--output", str(w / "new")],
     "--peak-learning-rate is the Transformer's warm-up schedule", []),
    ("train an RNN with a cosine schedule", lambda w: ["train", "--model", "luong", "--lr-schedule", "cosine",
                                                       "--output", str(w / "new")],
     "--lr-schedule is the Transformer's warm-up schedule", []),
    ("train an unknown schedule", lambda w: ["train", "--lr-schedule", "linear", "--output", str(w / "new")],
     "argument --lr-schedule: invalid choice: 'linear'", []),
    ("train shared embeddings, two vocabularies",
     lambda w: ["train", "--share-embeddings", "--dataset", "dates", "--output", str(w / "new")],
     "--share-embeddings needs one vocabulary for both languages: add --joint-vocabulary", []),
    ("train mismatched files", lambda w: ["train", *TRAIN, *files(w, ["a.en", "a.de"]), "--output", str(w / "new")],
     "a.de", ["text"]),
    ("train a missing file", lambda w: ["train", *TRAIN, *files(w, ["x.en", "x.de"]), "--output", str(w / "new")],
     "x.en", ["text"]),
    ("train strict, not UTF-8", lambda w: ["train", *TRAIN, *files(w, ["b.en", "b.de"]), "--strict-data",
                                           "--output", str(w / "new")],
     "b.de line 2: not valid UTF-8", ["text"]),
    ("train strict, an empty line", lambda w: ["train", *TRAIN, *files(w, ["c.en", "c.de"]), "--strict-data",
                                               "--output", str(w / "new")],
     "c.en line 2: an empty side", ["text"]),
    ("train a truncated gzip", lambda w: ["train", *TRAIN, *files(w, ["d.en", "d.de.gz"]),
                                          "--output", str(w / "new")],
     "truncated or corrupt", ["text"]),
    ("evaluate test files with an empty line",
     lambda w: ["evaluate", str(w / "run"), "--dataset", "files", "--test-files",
                *(str(w / "text" / f) for f in ("c.en", "c.de"))],
     "c.en line 2: an empty side", ["text", "run"]),
    ("evaluate test files that are not UTF-8",
     lambda w: ["evaluate", str(w / "run"), "--dataset", "files", "--test-files",
                *(str(w / "text" / f) for f in ("b.en", "b.de"))],
     "b.de line 2: not valid UTF-8", ["text", "run"]),
    ("prepare into a busy folder", lambda w: ["prepare", "--dataset", "dates", "--output", str(w / "busy")],
     "busy is not empty and holds no prepared corpus", ["busy"]),
    ("average onto a file", lambda w: ["average-checkpoints", str(w / "run" / "translator" / "model.keras"),
                                       "--output", str(w / "avg.weights.h5")],
     "avg.weights.h5 already exists", []),
    ("average a file that is not HDF5", lambda w: ["average-checkpoints", str(w / "avg.weights.h5"),
                                                   str(w / "avg.weights.h5"), "--output", str(w / "new.weights.h5")],
     "avg.weights.h5: not a Keras weights file (HDF5:", []),
    ("average a .keras that is not a zip", lambda w: ["average-checkpoints", str(w / "truncated" / "model.keras"),
                                                      "--output", str(w / "new.weights.h5")],
     "model.keras: not a valid Keras archive", ["truncated"]),
    ("evaluate a data folder that is a file", lambda w: ["evaluate", str(w / "run"), "--dataset", "prepared",
                                                         "--data-dir", str(w / "avg.weights.h5")],
     "avg.weights.h5: a file, not a folder (data_dir, --data-dir)", []),
    ("explain an empty sentence", lambda w: ["explain", str(w / "run"), "3 May 2001", " ", "-o", str(w / "p.html")],
     "sentence 2 is empty", ["run"]),
    ("explain into a missing folder", lambda w: ["explain", str(w / "run"), "3 May 2001", "-o",
                                                 str(w / "nowhere" / "p.html")], "does not exist", ["run"]),
    ("explain onto a folder", lambda w: ["explain", str(w / "run"), "3 May 2001", "-o", str(w / "busy")],
     "busy: it is a folder; give a file name", ["run", "busy"]),
    ("translate --plot-attention into a missing folder",
     lambda w: ["translate", str(w / "run"), "3 May 2001", "--plot-attention", str(w / "nowhere" / "a.png")],
     "the folder", ["run"]),
    ("translate --html under a file", lambda w: ["translate", str(w / "run"), "hi", "--html",
                                                 str(w / "avg.weights.h5" / "p.html")],
     "avg.weights.h5 is a file, not a folder", ["run"]),
    ("explain a folder without a translator", lambda w: ["explain", str(w / "busy"), "hi", "-o", str(w / "p.html")],
     "translator.json", ["busy"]),
    ("translate --html with sampling", lambda w: ["translate", str(w / "run"), "hi", "--method", "sample",
                                                  "--html", str(w / "p.html")], "--method sample", ["run"]),
    ("export onto a version", lambda w: ["export", str(w / "run" / "translator"), str(w / "served"),
                                         "--version", "1"],
     "already exists", ["served"]),
]


def _one_error_line(stderr, words):
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr[-2000:]
    assert words in lines[0] and "error:" in lines[0], lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_one_clear_line_and_nothing_changed(world, case, capsys):
    _, command, words, kept = case
    before = {name: snapshot(world / name) for name in kept}
    avg_before = (world / "avg.weights.h5").read_bytes()
    try:
        code = main(command(world))
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, (code, err[-2000:])
    _one_error_line(err, words)
    assert {name: snapshot(world / name) for name in kept} == before
    assert (world / "avg.weights.h5").read_bytes() == avg_before
    assert not (world / "new").exists()  # a failed train leaves no folder it created
    assert not (world / "p.html").exists()  # a failed explain writes no page


def test_a_real_process_prints_the_one_line_too(world):
    """As a shell runs it: no TensorFlow log lines (level and oneDNN unset), the one line, exit code 2."""
    _, command, words, _ = next(c for c in CASES if c[0] == "translate broken json")
    done = subprocess.run([sys.executable, "-m", "keras_attention.cli", *command(world)], capture_output=True,
                          text=True, timeout=300, env={k: v for k, v in os.environ.items()
                                                       if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")})
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    _one_error_line(done.stderr, words)


@pytest.mark.parametrize("verb", ["translate", "explain", "evaluate", "export"])
def test_a_folder_without_a_translator_is_refused_before_tensorflow_starts(world, verb, tmp_path):
    """The folder check needs no TensorFlow, so its one line comes before TensorFlow's seconds of import."""
    arguments = {"translate": ["hi"], "explain": ["hi", "-o", str(tmp_path / "p.html")], "evaluate": [],
                 "export": [str(tmp_path / "served")]}[verb]
    program = ("import sys; from keras_attention.cli import main; code = main(sys.argv[1:]); "
               "print(code, [m for m in ('tensorflow', 'keras') if m in sys.modules])")
    for folder, words in ((world / "nothing", "translator.json"), (world / "broken_json", "invalid JSON")):
        done = subprocess.run([sys.executable, "-c", program, verb, str(folder), *arguments], capture_output=True,
                              text=True, timeout=120)
        assert done.stdout.strip() == "2 []", (done.stdout, done.stderr[-2000:])
        _one_error_line(done.stderr, words)


PROGRAM = ("import sys; from keras_attention.cli import main; code = main(sys.argv[1:]); "
           "print(code, [m for m in ('tensorflow', 'keras') if m in sys.modules])")


@pytest.mark.parametrize("command, words", [
    (lambda w: ["train", "--dataset", "files", "--train-files", str(w / "missing.en"), str(w / "missing.de")],
     "missing.en: no such file"),
    (lambda w: ["train", "--data-dir", str(w / "nowhere")], "nowhere: no such folder"),
    (lambda w: ["train", "--source", "en", "--target", "en"], "must be different languages"),
    (lambda w: ["train", "--model", "transformer", "--precision", "float32", "--target", "xx"], "target='xx'"),
    (lambda w: ["prepare", "--dataset", "files", "--train-files", str(w / "a.en"), str(w / "missing.de")],
     "missing.de: no such file"),
    (lambda w: ["train", "--dataset", "files"], "--dataset files needs --train-files SOURCE TARGET"),
    (lambda w: ["prepare", "--dataset", "tsv"], "--dataset tsv needs --train-files FILE"),
    (lambda w: ["train", "--dataset", "tfds"], "--dataset tfds needs --tfds-name NAME"),
    (lambda w: ["train", "--dataset", "prepared"], "--dataset prepared reads a local folder: give --data-dir"),
    (lambda w: ["train", "--dataset", "wmt14"], "--dataset wmt14 reads a local folder: give --data-dir"),
    (lambda w: ["evaluate", "RUN", "--dataset", "files", "--train-files", "a.en", "a.de"],
     "needs --test-files SOURCE TARGET: the split evaluated (--split test)"),
    (lambda w: ["evaluate", "RUN", "--dataset", "prepared", "--split", "valid"],
     "--dataset prepared reads a local folder"),
    (lambda w: ["evaluate", "RUN"], "was trained on the generated dates corpus (human dates -> ISO 8601), and"),
], ids=["train file", "data dir", "same languages", "unknown language", "prepare file", "files without files",
        "tsv without a file", "tfds without a name", "prepared without a folder", "wmt14 without a folder",
        "evaluate files without the split", "evaluate prepared without a folder", "evaluate dates on Multi30k"])
def test_a_bad_corpus_is_refused_before_tensorflow_starts(command, words, tmp_path, request):
    """Checks that need no TensorFlow come before its seconds of import, and leave no folder behind."""
    (tmp_path / "a.en").write_text("a\n", encoding="utf-8")
    output = tmp_path / "out"
    arguments = command(tmp_path)
    if "RUN" in arguments:  # a real run's folder (the shared one, trained only for the cases that need it)
        arguments = [str(request.getfixturevalue("tiny_run")) if word == "RUN" else word for word in arguments]
    arguments += ["--output", str(output)] if arguments[0] != "evaluate" else []
    done = subprocess.run([sys.executable, "-c", PROGRAM, *arguments], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "2 []", (done.stdout, done.stderr[-2000:])
    _one_error_line(done.stderr, words)
    assert not output.exists()
