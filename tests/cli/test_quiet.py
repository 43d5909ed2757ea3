"""The command line as a log file sees it: no TensorFlow start-up lines, no progress-bar carriage returns."""

import os
import subprocess
import sys

import pytest

from keras_attention.cli import commands, main


def run(*args, env=None):
    # As a user's shell: no log level, oneDNN or XLA flags set by the tests (tests/conftest.py).
    unset = ("TF_CPP_MIN_LOG_LEVEL", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS")
    env = {k: v for k, v in (env or os.environ).items() if k not in unset}
    return subprocess.run([sys.executable, "-m", "keras_attention.cli", *args], capture_output=True, text=True,
                          timeout=600, env=env)


def test_train_and_translate_print_only_their_own_lines(tmp_path, capsys):
    run_dir = tmp_path / "run"
    trained = run("train", "--model", "bahdanau", "--preset", "tiny", "--dataset", "dates", "--vocab-size", "200",
                  "--max-length", "32", "--epochs", "2", "--batch-size", "32", "--max-train-examples", "64",
                  "--max-test-examples", "50", "--bleu-sample", "8",
                  "--no-jit", "--output", str(run_dir))
    assert trained.returncode == 0, trained.stderr[-3000:]
    for stream in (trained.stdout, trained.stderr):
        assert "\r" not in stream and "\x1b[" not in stream  # no progress bars in a log file
        assert "oneDNN" not in stream and "cuda" not in stream.lower() and "I0000" not in stream
    assert trained.stdout.count("Epoch 1/2") == 1 and "Epoch 2/2" in trained.stdout
    assert "Strategy: " in trained.stdout and "XLA: off (--no-jit)." in trained.stdout  # verbose=2: what it chose

    # Translating, with XLA: still quiet, and the compiled decoding programs are written to --xla-cache (a later
    # process loading them is tests/base/test_xla_cache.py's test; a refused command's one line in a real process
    # is tests/cli/test_bad_input.py's).
    cache = tmp_path / "xla"
    compiled = run("translate", str(run_dir / "translator"), "3 March 1999", "--jit-compile", "--xla-cache", str(cache))
    assert compiled.returncode == 0 and compiled.stderr == "", compiled.stderr
    assert len(compiled.stdout.splitlines()) == 1
    assert main(["translate", str(run_dir / "translator"), "3 March 1999"]) == 0
    assert compiled.stdout == capsys.readouterr().out  # XLA changes no translation
    (folder,) = cache.iterdir()
    assert folder.name.startswith("tf") and any(entry.suffix == ".pb" for entry in folder.iterdir())


# What TensorFlow's C++ code writes to file descriptor 2 (at import and while ops run), and a line of ours.
TENSORFLOW_LINES = (b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
                    b"I0000 00:00:1796447637.962653    2067 port.cc:153] oneDNN custom operations are on.\n"
                    b"E0000 00:00:1796448663.866892   16579 cuda_platform.cc:52] failed call to cuInit\n")
OURS = b"warning: 2 of 9 translations had a source longer than the translator's max_source_length=8 tokens\n"


@pytest.mark.parametrize("verbose", [False, True])
def test_tensorflow_lines_on_file_descriptor_2_are_dropped_unless_verbose(verbose, capfd, monkeypatch):
    def command_writing_to_fd_2(args):
        os.write(2, TENSORFLOW_LINES + OURS)
        return 0

    monkeypatch.setattr(commands, "_run", command_writing_to_fd_2)
    monkeypatch.setattr(sys, "argv", ["keras-attention", *(["--verbose"] if verbose else []), "translate", "x", "hi"])
    assert commands.main() == 0
    err = capfd.readouterr().err.encode()
    assert (TENSORFLOW_LINES + OURS in err) if verbose else (err == OURS), err
