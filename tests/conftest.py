import atexit
import fcntl
import gc
import json
import os
import shutil
import signal
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Test workers (`-n 2`) share the cores: one thread per TensorFlow op in each, where TensorFlow's pool would take
# every core in every worker (and in the processes they start, which inherit it) and the two would fight.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
# TensorFlow's oneDNN kernels pay a set-up cost per call that the tests' tiny tensors never earn back: with
# TensorFlow's own kernels the decoding and model tests take about 7% less time. Outputs agree to float32 round-off.
# Processes the tests start inherit it; the tests of what a user's shell shows clear it (oneDNN's start-up line).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# Under JAX each op compiles anew for every shape it meets, and the tests meet many small shapes: compiled without
# LLVM's optimisations (the same XLA programs, slower machine code), the JAX pass takes a fifth less time.
if os.environ.get("KERAS_BACKEND") == "jax":
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
# The command line keeps XLA programs in the user's cache folder; the tests keep theirs apart, in a folder that
# the pytest process which made it removes when it exits (the processes its tests start inherit it).
if "KERAS_ATTENTION_XLA_CACHE" not in os.environ:
    os.environ["KERAS_ATTENTION_XLA_CACHE"] = tempfile.mkdtemp(prefix="keras-attention-xla-")
    atexit.register(shutil.rmtree, os.environ["KERAS_ATTENTION_XLA_CACHE"], ignore_errors=True)

import pytest  # noqa: E402

from tests.untuned_iterators import untune_iterators  # noqa: E402

# Keras (and with it TensorFlow, about 5 CPU-s) is imported by the fixtures below, in the processes that run
# tests: under `-n 2` the process that hands the tests out never imports it, and the workers do not wait for it.


@pytest.fixture(scope="session", autouse=True)
def _untuned_iterators():
    """Every tf.data iterator of a TensorFlow test process runs untuned (tests/untuned_iterators.py says why)."""
    import keras

    if keras.backend.backend() == "tensorflow":
        untune_iterators()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts from float32 and fixed seeds."""
    import keras
    import numpy as np

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler while the test runs (a test runner may have set another)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def dropped(monkeypatch):
    """The types of the exceptions Python drops ("Exception ignored in ...") while the test runs."""
    types = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: types.append(unraisable.exc_type))
    return types


@pytest.fixture
def press_during_a_collection():
    """A function that presses Ctrl-C from a garbage-collection callback, as when the key comes while JAX's
    runs: Python's own handler raises KeyboardInterrupt there, and Python drops it."""

    def press_now():
        def press(phase, info):
            if phase == "start" and not pressed:
                pressed.append(True)
                signal.raise_signal(signal.SIGINT)

        pressed = []
        gc.callbacks.append(press)
        try:
            gc.collect(0)  # the youngest generation: its callbacks run as a full collection's, in a moment
        finally:
            gc.callbacks.remove(press)

    return press_now


def find_multi30k(base_url=None):
    """The folder of the Multi30k files, found as a user's code finds them.

    `$KERAS_ATTENTION_DATA/multi30k` when the variable is set; otherwise the
    loader's checksummed download into the Keras cache folder. When neither
    works: `pytest.skip` with one line naming the variable, or under
    `CI=true` `pytest.fail`. The variable is then set to the folder found, so
    command-line runs and loaders called without `data_dir` read the same files.
    """
    from keras_attention import DATA_ENV_VAR
    from keras_attention.data import multi30k

    names = [multi30k.multi30k_filename(split, language) for split in ("train", "val", "test")
             for language in ("en", "de")]
    try:
        folder = os.path.dirname(multi30k.multi30k_paths(names, base_url=base_url or multi30k.BASE_URL)[0])
    except (OSError, ValueError) as error:
        message = (f"Multi30k is needed: set {DATA_ENV_VAR} to the folder holding multi30k/, or allow its "
                   f"download ({type(error).__name__})")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    os.environ[DATA_ENV_VAR] = os.path.dirname(folder)
    return folder


@pytest.fixture(scope="session")
def multi30k_dir():
    """The Multi30k folder (`find_multi30k`): every test that reads Multi30k asks for it."""
    return find_multi30k()


# The command line of the test run's one tiny finished run (`tiny_run`): its model and training, then its data.
TINY_TRAINING = ["--model", "bahdanau", "--preset", "tiny", "--vocab-size", "200", "--max-length", "32",
                 "--epochs", "1", "--batch-size", "16", "--no-jit", "--max-test-examples", "50", "--bleu-sample", "0"]
TINY_RUN = ["train", *TINY_TRAINING, "--dataset", "dates", "--max-train-examples", "128"]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A finished `keras-attention train` run folder (`TINY_RUN`), trained once for the whole test run and
    shared by the command-line tests: copy it before changing it."""

    def build(folder):
        from keras_attention.cli import main

        assert main([*TINY_RUN, "--output", str(folder / "run")]) == 0

    return shared_folder(tmp_path_factory, "tiny_run", build) / "run"


def copy_with_languages(translator, copy, source, target):
    """Copy the translator folder `translator` to `copy`, recording `source`->`target` as its languages, as if
    it had been trained with `--source SOURCE --target TARGET`. Returns `copy`."""
    shutil.copytree(translator, copy)
    config = json.loads((copy / "translator.json").read_text())
    config["metadata"].update(source_language=source, target_language=target)
    (copy / "translator.json").write_text(json.dumps(config))
    return copy


def shared_folder(tmp_path_factory, name, build):
    """`name`, a folder built once for the whole test run and shared by every test worker.

    The first worker to ask calls `build(folder)` while it holds a file lock;
    the others wait for it, then read the same folder. The tests must only read it.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-of-USER/pytest-N, above every worker's own folder
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


# Modules of tests that take 15 s or more (a training run, a process of their own), the longest first. Under
# `-n 2` they are handed out in this order, after the `xdist_group` groups (the largest first:
# `--loadscope-reorder`), so that the last minutes of a run are short tests shared by both workers instead of one
# long test with the other worker idle. The last ones are the longest of the JAX pass, which runs none of the others.
LONG_TESTS_FIRST = (
    "training/test_learns_dates.py", "training/test_fault_tolerance.py", "training/test_distribution.py",
    "cli/test_quiet.py", "serving/test_benchmark_script.py", "scripts/test_benchmarks.py",
    "training/test_mixed_precision.py", "serving/test_export.py", "scripts/test_benchmark_distribution.py",
    "data/test_streaming.py", "scripts/test_ab_decoding.py", "cli/test_prepare.py", "data/test_records.py",
    "data/test_pipeline.py",
    "models/test_transformer_decoding.py", "layers/test_padding_invariance.py", "models/test_seq2seq_rnn.py",
    "layers/test_transformer_blocks.py", "layers/test_multi_head_attention_cache.py", "models/test_transformer.py",
    "models/test_decomposable_attention.py",
)


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    rank = {os.path.join(here, name): i for i, name in enumerate(LONG_TESTS_FIRST)}
    missing = [path for path in rank if not os.path.isfile(path)]
    if missing:
        raise pytest.UsageError(f"LONG_TESTS_FIRST in tests/conftest.py names modules that do not exist: {missing}")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a serial run keeps the files' order
        items.sort(key=lambda item: rank.get(str(item.path), len(rank)))  # stable: each module keeps its order
