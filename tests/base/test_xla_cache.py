"""The XLA program cache: where it goes, and that a later process loads a program instead of compiling it."""

import os
import subprocess
import sys

import pytest

from keras_attention.base import xla_cache
from keras_attention.base.xla_cache import FLAG, machine_key, use_xla_cache


def test_the_flag_names_a_subfolder_per_tensorflow_version_and_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=0")
    folder = use_xla_cache(str(tmp_path))
    assert folder == os.path.join(str(tmp_path), machine_key()) and os.path.isdir(folder)
    assert os.environ["TF_XLA_FLAGS"] == f"--tf_xla_auto_jit=0 {FLAG}={folder}"  # the user's flags stay
    assert machine_key().startswith("tf") and len(machine_key().rsplit("-", 1)[1]) == 12


def test_a_cache_folder_already_in_the_flags_is_kept_unless_one_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_XLA_FLAGS", f"{FLAG}=/somewhere/else")
    assert use_xla_cache() == "/somewhere/else"
    assert os.environ["TF_XLA_FLAGS"] == f"{FLAG}=/somewhere/else"
    folder = use_xla_cache(str(tmp_path))  # given: it replaces the one in the flags
    assert folder == os.path.join(str(tmp_path), machine_key()) and os.environ["TF_XLA_FLAGS"] == f"{FLAG}={folder}"


def test_the_default_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(xla_cache.ENV_VAR, str(tmp_path / "mine"))
    assert xla_cache.default_folder() == str(tmp_path / "mine")
    monkeypatch.delenv(xla_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert xla_cache.default_folder() == os.path.join(str(tmp_path), "keras-attention", "xla")


def test_a_file_in_the_way_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match=r"cannot use '.*file.*' as the XLA cache folder") as error:
        use_xla_cache(str(tmp_path / "file"))
    assert "\n" not in str(error.value)
    assert "TF_XLA_FLAGS" not in os.environ


# One process: a compiled function of `scale`, its value printed.
PROGRAM = """
import sys
from keras_attention.base.xla_cache import use_xla_cache
use_xla_cache(sys.argv[1])
import tensorflow as tf
scale = float(sys.argv[2])

@tf.function(jit_compile=True)
def f(x):
    for _ in range(4):
        x = tf.tanh(tf.matmul(x, x) * scale)
    return x

print(float(tf.reduce_sum(f(tf.reshape(tf.range(64, dtype=tf.float32), [8, 8]) / 64.0))))
"""


def _run(folder, scale):
    """The printed value, and whether TensorFlow says it loaded the program from the folder."""
    env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
    env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="device_executable_persistor=2")
    done = subprocess.run([sys.executable, "-c", PROGRAM, folder, str(scale)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip().splitlines()[-1]), "Loading cached entry" in done.stderr


def _entries(folder):
    return {name: os.path.getmtime(os.path.join(folder, name)) for name in os.listdir(folder)}


def test_a_later_process_loads_the_program_and_a_changed_program_compiles_anew(tmp_path):
    folder = os.path.join(str(tmp_path), machine_key())
    first, loaded = _run(str(tmp_path), 0.5)
    entries = _entries(folder)
    assert not loaded and len(entries) == 1 and next(iter(entries)).endswith(".pb")  # compiled, written
    assert _run(str(tmp_path), 0.5) == (first, True)  # loaded, the same value
    assert _entries(folder) == entries  # nothing written again
    changed, loaded = _run(str(tmp_path), 0.25)  # the same function with another constant: another program
    assert not loaded and changed != first and len(_entries(folder)) == 2
