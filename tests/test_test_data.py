"""The tests find Multi30k as users do, through one fixture (`multi30k_dir`, tests/conftest.py)."""

import pathlib
import re

import pytest

from keras_attention import DATA_ENV_VAR
from tests.conftest import find_multi30k

TESTS = pathlib.Path(__file__).parent
# What reads Multi30k without being handed a folder: the loader's defaults, the scripts and tutorials that do.
READS_MULTI30K = re.compile(r"load_multi30k\(\"|train_multi30k\.main\(|benchmark_buckets\.main|TUTORIALS")


def test_every_module_that_reads_multi30k_asks_for_the_one_fixture():
    for path in sorted(TESTS.rglob("*.py")):
        if path in (TESTS / "conftest.py", pathlib.Path(__file__)):
            continue
        text = path.read_text(encoding="utf-8")
        assert "def multi30k_dir" not in text, f"{path}: a second multi30k_dir fixture"
        assert not re.search(r"pytest\.fail\([^)]*(DATA_ENV_VAR|KERAS_ATTENTION_DATA)", text), path
        if READS_MULTI30K.search(text):
            assert "multi30k_dir" in text, f"{path} reads Multi30k without the multi30k_dir fixture"


@pytest.fixture
def no_multi30k(monkeypatch, tmp_path):
    """No variable, an empty Keras cache and a download address that refuses: Multi30k cannot be found."""
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    return "http://127.0.0.1:9/multi30k/"


def test_without_multi30k_the_tests_skip_with_one_line_naming_the_variable(no_multi30k, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        find_multi30k(base_url=no_multi30k)
    message = str(skipped.value)
    assert DATA_ENV_VAR in message and "\n" not in message and "/work" not in message


def test_under_ci_a_missing_multi30k_fails(no_multi30k, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=DATA_ENV_VAR):
        find_multi30k(base_url=no_multi30k)


def test_a_found_copy_is_named_to_the_commands_the_tests_run(multi30k_dir, monkeypatch):
    import os

    monkeypatch.setenv(DATA_ENV_VAR, os.path.dirname(multi30k_dir))
    assert find_multi30k() == multi30k_dir and os.environ[DATA_ENV_VAR] == os.path.dirname(multi30k_dir)
