"""Fixtures for the data tests: tokenizers built once on Multi30k (found by `multi30k_dir`, tests/conftest.py)."""

import gzip
import os

import pytest
import tensorflow as tf



def read_gzip_lines(path):
    """Lines of a gzip file, read independently of the code under test."""
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


@pytest.fixture(scope="session")
def read_gz():
    """`read_gz(path)`: the lines of a gzip file, read with the gzip module only."""
    return read_gzip_lines


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
