"""Fixtures for the data tests: the shared Multi30k folder and tokenizers built once."""

import gzip
import os

import pytest
import tensorflow as tf

from keras_attention import DATA_ENV_VAR


def read_gzip_lines(path):
    """Lines of a gzip file, read independently of the code under test."""
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


@pytest.fixture(scope="session")
def read_gz():
    """`read_gz(path)`: the lines of a gzip file, read with the gzip module only."""
    return read_gzip_lines


@pytest.fixture(scope="session")
def multi30k_dir():
    """The folder holding the Multi30k .gz files: $KERAS_ATTENTION_DATA/multi30k."""
    root = os.environ.get(DATA_ENV_VAR)
    if not root:
        pytest.fail(
            f"The environment variable {DATA_ENV_VAR} is not set. Set it to the folder "
            "holding multi30k/ (for example /work/shared/data) to run the data tests."
        )
    folder = os.path.join(root, "multi30k")
    if not os.path.isfile(os.path.join(folder, "train.en.gz")):
        pytest.fail(f"{DATA_ENV_VAR}={root!r}, but {folder}/train.en.gz does not exist.")
    return folder


@pytest.fixture(scope="session")
def de_tokenizer(multi30k_dir):
    """Cased German WordPiece tokenizer (8000 tokens) learned on Multi30k train."""
    from keras_attention.data import SubwordTokenizer

    text = tf.data.Dataset.from_tensor_slices(
        read_gzip_lines(os.path.join(multi30k_dir, "train.de.gz"))
    )
    return SubwordTokenizer.from_dataset(text, vocab_size=8000)


@pytest.fixture(scope="session")
def en_tokenizer(multi30k_dir):
    """Lower-cased English WordPiece tokenizer (8000 tokens max) on Multi30k train."""
    from keras_attention.data import SubwordTokenizer

    text = tf.data.Dataset.from_tensor_slices(
        read_gzip_lines(os.path.join(multi30k_dir, "train.en.gz"))
    )
    return SubwordTokenizer.from_dataset(text, vocab_size=8000, lower_case=True)
