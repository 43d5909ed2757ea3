"""Fixtures for the data tests: tokenizers learned once a test run on Multi30k (found by `multi30k_dir`,
tests/conftest.py)."""

import gzip
import os

import pytest
import tensorflow as tf

from tests.conftest import shared_folder


def read_gzip_lines(path):
    """Lines of a gzip file, read independently of the code under test."""
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


@pytest.fixture(scope="session")
def read_gz():
    """`read_gz(path)`: the lines of a gzip file, read with the gzip module only."""
    return read_gzip_lines


def _multi30k_tokenizer(tmp_path_factory, multi30k_dir, lang, **options):
    """The 8000-token WordPiece tokenizer of Multi30k train's `lang` side: learned once for the whole test run
    (its vocabulary file shared by the test workers), then read from that file."""
    from keras_attention.data import SubwordTokenizer

    def learn(folder):
        text = tf.data.Dataset.from_tensor_slices(read_gzip_lines(os.path.join(multi30k_dir, f"train.{lang}.gz")))
        SubwordTokenizer.from_dataset(text, vocab_size=8000, **options).save_vocabulary(folder / "vocab.txt")

    folder = shared_folder(tmp_path_factory, f"multi30k-{lang}-tokenizer", learn)
    return SubwordTokenizer.from_vocabulary_file(folder / "vocab.txt", **options)


@pytest.fixture(scope="session")
def de_tokenizer(tmp_path_factory, multi30k_dir):
    """Cased German WordPiece tokenizer (8000 tokens) learned on Multi30k train."""
    return _multi30k_tokenizer(tmp_path_factory, multi30k_dir, "de")


@pytest.fixture(scope="session")
def en_tokenizer(tmp_path_factory, multi30k_dir):
    """Lower-cased English WordPiece tokenizer (8000 tokens max) on Multi30k train."""
    return _multi30k_tokenizer(tmp_path_factory, multi30k_dir, "en", lower_case=True)
