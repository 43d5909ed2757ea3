"""The training batches' length buckets: how many, and the batch shapes they give."""

import dataclasses

import pytest
import tensorflow as tf

from keras_attention.training import corpus
from keras_attention.training.config import OptimizationConfig, TrainConfig
from keras_attention.training.corpus import (MAX_BUCKETS, PAIRS_PER_BUCKET, XLA_MIN_PAIRS, batch_shapes,
                                             length_buckets, use_xla)


@pytest.mark.parametrize("pairs, epochs, jit_compile, expected", [
    (2_000, 1, True, 1),  # a short run: one shape
    (PAIRS_PER_BUCKET - 1, 1, True, 1),
    (PAIRS_PER_BUCKET, 3, True, 3),  # one bucket for each PAIRS_PER_BUCKET pairs trained on
    (29_000, 2, True, 5),
    (29_000, 12, True, MAX_BUCKETS),  # capped
    (None, 1, True, MAX_BUCKETS),  # a corpus of unknown size
    (2_000, 1, False, MAX_BUCKETS),  # without XLA a shape costs little
])
def test_length_buckets_grow_with_the_pairs_a_run_trains_on(pairs, epochs, jit_compile, expected):
    optimization = OptimizationConfig(epochs=epochs, jit_compile=jit_compile)
    assert length_buckets(optimization, pairs) == expected
    assert length_buckets(dataclasses.replace(optimization, length_buckets=6), pairs) == 6  # the user's choice wins


@pytest.mark.parametrize("model, pairs, epochs, jit_compile, expected", [
    ("transformer", 2_000, 1, "auto", False),  # too short to repay compiling
    ("transformer", XLA_MIN_PAIRS - 1, 1, "auto", False),
    ("transformer", XLA_MIN_PAIRS, 1, "auto", True),
    ("transformer", XLA_MIN_PAIRS // 2, 2, "auto", True),  # epochs count
    ("bahdanau", XLA_MIN_PAIRS, 1, "auto", True),  # every kind of model alike
    ("luong", XLA_MIN_PAIRS - 1, 1, "auto", False),
    ("transformer", None, 1, "auto", True),  # a corpus of unknown size: a large one
    ("transformer", 2_000, 1, True, True),  # the user's choice wins
    ("rnn", 10 ** 8, 5, False, False),
])
def test_xla_is_used_when_the_run_is_long_enough(model, pairs, epochs, jit_compile, expected):
    optimization = TrainConfig.from_flat(model=model, dataset="dates", epochs=epochs,
                                         jit_compile=jit_compile).optimization
    xla, why = use_xla(optimization, pairs, strategy=None)
    assert xla is expected and why
    one_replica = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert use_xla(optimization, pairs, one_replica)[0] is expected


def test_xla_needs_one_replica():
    class TwoReplicas:  # what `distribution.xla_supported` reads of a strategy
        num_replicas_in_sync = 2

    assert use_xla(OptimizationConfig(jit_compile=True), 10 ** 6, TwoReplicas()) == (False, "XLA needs one replica")


def test_a_short_run_trains_without_xla_by_default():
    shapes, prepared = _train_shapes(epochs=1)  # 2,000 pairs, jit_compile="auto"
    assert prepared.xla is False
    assert len(shapes) > MAX_BUCKETS  # the batches of a run without XLA


def test_length_buckets_is_checked():
    with pytest.raises(ValueError, match="length_buckets=0"):
        TrainConfig.from_flat(length_buckets=0)
    with pytest.raises(ValueError, match="bucket_method='quantile'"):
        TrainConfig.from_flat(bucket_method="quantile")


def test_the_bucket_method_reaches_the_training_batches():
    """The same 2,000 pairs in 4 buckets: min-padding boundaries pad fewer ids in as few shapes."""
    from keras_attention.data import padding_fraction

    runs = {method: _train_shapes(epochs=30, jit_compile=True, length_buckets=4, bucket_method=method)
            for method in ("equal_count", "min_padding")}
    padding = {method: padding_fraction(prepared.train.take(prepared.steps_per_epoch))
               for method, (_, prepared) in runs.items()}
    assert len(runs["min_padding"][0]) <= 5 and runs["min_padding"][0] != runs["equal_count"][0]
    assert padding["min_padding"] < padding["equal_count"]


def _train_shapes(**options):
    config = TrainConfig.from_flat(model="bahdanau", preset="tiny", dataset="dates", vocab_size=200,
                                   target_vocab_size=40, max_length=48, batch_size=32, max_train_examples=2_000,
                                   **options)
    prepared = corpus.training_data(config, strategy=None)
    return set(batch_shapes(prepared.train.take(prepared.steps_per_epoch))), prepared


@pytest.mark.parametrize("epochs, buckets", [(1, 1), (10, 2)])
def test_xla_batches_take_one_shape_a_bucket(epochs, buckets):
    shapes, prepared = _train_shapes(epochs=epochs, jit_compile=True)
    assert prepared.xla is True
    assert len(shapes) == buckets  # 2,000 pairs: one bucket an epoch of them
    # Every batch is full (the ragged rest of a bucket is dropped) and source and target are padded alike.
    assert all(x[0] == 32 and x[1] == y[1] for x, y in shapes)
    assert prepared.steps_per_epoch >= 2_000 // 32 - buckets


def test_without_xla_batches_are_padded_to_their_longest_pair():
    shapes, _ = _train_shapes(epochs=1, jit_compile=False)
    assert len(shapes) > MAX_BUCKETS  # bucketed by length, each batch as long as its longest pair


def test_only_the_multi30k_splits_needed_are_read(multi30k_dir, tmp_path):
    # evaluate --split test reads a folder that holds only the test files (before, the missing train file was named).
    import shutil

    from keras_attention.training.config import DataConfig

    for name in ("test_2016_flickr.en.gz", "test_2016_flickr.de.gz"):
        shutil.copy(f"{multi30k_dir}/{name}", tmp_path / name)
    config = DataConfig(dataset="multi30k", data_dir=str(tmp_path))
    (train, valid, test), _ = corpus.load_splits(config, needed=("test",))
    assert train is None and valid is None and test.cardinality() == 1000
    with pytest.raises(FileNotFoundError, match="holds no Multi30k train.en.gz"):
        corpus.load_splits(config)
