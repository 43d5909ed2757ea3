"""Which parts need TensorFlow: the layers never import it; the TensorFlow-only entries say so in one line."""

import ast
import json
import os
import pathlib
import subprocess
import sys

import keras_attention

PACKAGE = pathlib.Path(keras_attention.__file__).parent

# Under the JAX backend: import the layers and models, then try every TensorFlow-only entry.
_PROBE = r"""
import contextlib, io, json, sys
import keras_attention.layers, keras_attention.models
report = {"tensorflow_imported": any(m == "tensorflow" or m.startswith("tensorflow.") for m in sys.modules)}
from keras_attention.base.tensorflow_only import BackendError
from keras_attention.decoding.translator import Translator
from keras_attention.serving.export import export
from keras_attention.training.distribution import get_strategy
from keras_attention.training.recipe import train
from keras_attention import cli
errors = {}
for name, entry in [("Translator", lambda: Translator(None, None, None)), ("export", lambda: export(None, "unused")),
                    ("get_strategy", lambda: get_strategy("default")), ("train", lambda: train(None))]:
    try:
        entry()
    except BackendError as error:
        errors[name] = str(error)
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr):
    report["cli_status"] = cli.main(["translate", "no-such-run", "hello"])
report["cli_stderr"] = stderr.getvalue()
report["errors"] = errors
print(json.dumps(report))
"""


def _imports_of(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_no_layer_module_imports_tensorflow():
    modules = sorted((PACKAGE / "layers").glob("*.py"))
    assert len(modules) > 5
    for path in modules:
        bad = [name for name in _imports_of(path) if name.split(".")[0] == "tensorflow"]
        assert not bad, f"{path.name} imports {bad}"


def test_under_jax_layers_run_without_tensorflow_and_tensorflow_entries_say_so():
    environment = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-c", _PROBE], env=environment, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["tensorflow_imported"] is False
    assert sorted(report["errors"]) == ["Translator", "export", "get_strategy", "train"]
    for message in report["errors"].values():
        assert "\n" not in message and "TensorFlow backend only" in message and "'jax'" in message
    assert report["cli_status"] == 2
    lines = report["cli_stderr"].strip().splitlines()
    assert lines == ["keras-attention translate: error: The command line runs on Keras' TensorFlow backend only; "
                     "this process uses the 'jax' backend (set KERAS_BACKEND=tensorflow, or use the layers and "
                     "models alone)"]


def test_the_configured_backend_is_read_as_keras_reads_it(tmp_path, monkeypatch):
    """Before Keras is imported: KERAS_BACKEND first, then keras.json in KERAS_HOME, else TensorFlow."""
    from keras_attention.base.tensorflow_only import configured_backend

    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert configured_backend() == "tensorflow"  # no keras.json
    (tmp_path / "keras.json").write_text('{"backend": "jax", "floatx": "float32"}')
    assert configured_backend() == "jax"
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    assert configured_backend() == "torch"
    (tmp_path / "keras.json").write_text("{not json")
    monkeypatch.delenv("KERAS_BACKEND")
    assert configured_backend() == "tensorflow"  # Keras ignores a broken file too


def test_the_command_line_refuses_another_backend_before_importing_keras(tmp_path):
    program = ("import sys; from keras_attention.cli import main; code = main(sys.argv[1:]); "
               "print(code, [m for m in ('tensorflow', 'keras') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", program, "translate", str(tmp_path / "nothing"), "hi"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "KERAS_BACKEND": "jax"})
    assert done.stdout.strip() == "2 []", (done.stdout, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and "TensorFlow backend only" in done.stderr
