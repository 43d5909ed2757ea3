import json
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import (
    auto_bucket_boundaries,
    load_multi30k,
    make_translation_dataset,
    min_padding_boundaries,
    padding_fraction,
)


def rows(dataset):
    """All (source, target_in, target_out) rows of the batches, padding removed,
    after checking that padding is zeros after the tokens and nowhere else."""
    found = []
    for (x, y_in), y_out in dataset.as_numpy_iterator():
        assert x.dtype == y_in.dtype == y_out.dtype == np.int32
        assert y_in.shape == y_out.shape and x.shape[0] == y_in.shape[0]
        for ids in (x, y_in, y_out):
            lengths = (ids != 0).sum(axis=1)
            for row, n in zip(ids, lengths):
                assert (row[:n] != 0).all() and (row[n:] == 0).all()
        for a, b, c in zip(x, y_in, y_out):
            found.append((tuple(a[a != 0]), tuple(b[b != 0]), tuple(c[c != 0])))
    return found


@pytest.fixture(scope="module")
def val_pairs(multi30k_dir):
    return load_multi30k("de", "en", "val")


def expected_rows(pairs, source_tok, target_tok):
    """Token ids of each pair, tokenized outside any pipeline."""
    sources, targets = zip(*pairs.as_numpy_iterator())
    xs = source_tok.tokenize(list(sources)).to_list()
    ys = target_tok.tokenize(list(targets)).to_list()
    return [(tuple(x), tuple(y)) for x, y in zip(xs, ys)]


def test_markers_shift_and_drop(val_pairs, de_tokenizer, en_tokenizer, caplog):
    start, end = en_tokenizer.start_id, en_tokenizer.end_id
    max_length = 20
    with caplog.at_level(logging.INFO, logger="keras_attention.data"):
        ds, stats = make_translation_dataset(
            val_pairs, de_tokenizer, en_tokenizer, 32, max_length=max_length, return_stats=True
        )
    found = rows(ds)
    for x, y_in, y_out in found:
        assert len(x) <= max_length and len(y_in) <= max_length
        assert x[0] == de_tokenizer.start_id and x[-1] == de_tokenizer.end_id
        assert y_in[0] == start and y_out[-1] == end
        assert y_in[1:] == y_out[:-1]  # target_out is target_in shifted by one.
    expected = [
        ((de_tokenizer.start_id, *x, de_tokenizer.end_id), (start, *y), (*y, end))
        for x, y in expected_rows(val_pairs, de_tokenizer, en_tokenizer)
    ]
    kept = [e for e in expected if len(e[0]) <= max_length and len(e[1]) <= max_length]
    assert sorted(found) == sorted(kept)
    assert 0 < stats.long_pairs == len(expected) - len(kept)
    assert stats.pairs == len(expected) == 1014
    print(f"\n{stats}")
    assert f"{stats.long_pairs} over the maximum length dropped" in caplog.text
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_truncate_keeps_every_pair(val_pairs, de_tokenizer, en_tokenizer):
    ds, stats = make_translation_dataset(
        val_pairs, de_tokenizer, en_tokenizer, 64, max_length=(12, 10), on_long="truncate",
        return_stats=True,
    )  # fmt: skip
    found = rows(ds)
    expected = expected_rows(val_pairs, de_tokenizer, en_tokenizer)
    assert len(found) == len(expected)
    assert stats.long_pairs == sum(len(x) + 2 > 12 or len(y) + 1 > 10 for x, y in expected)
    assert sorted(r[0] for r in found) == sorted((2, *x[:10], 3) for x, _ in expected)
    assert sorted(r[2] for r in found) == sorted((*y[:9], 3) for _, y in expected)


def test_bucketing_pads_less(val_pairs, de_tokenizer, en_tokenizer):
    common = dict(batch_size=64, max_length=64, shuffle=True, seed=3)
    plain = make_translation_dataset(val_pairs, de_tokenizer, en_tokenizer, **common)
    bucketed, stats = make_translation_dataset(
        val_pairs, de_tokenizer, en_tokenizer, bucket_boundaries="auto", return_stats=True, **common
    )
    plain_fraction, bucket_fraction = padding_fraction(plain), padding_fraction(bucketed)
    print(
        f"\nMulti30k validation de->en, batch 64: padding {plain_fraction:.1%} of ids without "
        f"buckets, {bucket_fraction:.1%} with boundaries {auto_bucket_boundaries(stats.lengths)}"
        f" (ratio {bucket_fraction / plain_fraction:.2f})"
    )
    assert bucket_fraction < plain_fraction
    count = sum(int(tf.shape(y)[0]) for _, y in bucketed)
    assert count == stats.pairs - stats.long_pairs


def test_min_padding_buckets_pad_less_for_as_many_shapes(val_pairs, de_tokenizer, en_tokenizer):
    """Batches padded to their bucket's boundary (XLA's way), 8 buckets: the same rows, fewer padded ids."""
    common = dict(batch_tokens=1024, max_length=64, bucket_boundaries=8, pad_to_bucket_boundary=True)
    equal = make_translation_dataset(val_pairs, de_tokenizer, en_tokenizer, None, **common)
    fewest, stats = make_translation_dataset(val_pairs, de_tokenizer, en_tokenizer, None, **common,
                                             bucket_method="min_padding", return_stats=True)
    assert sorted(rows(fewest)) == sorted(rows(equal))

    def shapes(ds):
        return {(x.shape[1], y.shape[1]) for (x, y), _ in ds.as_numpy_iterator()}

    # One width a bucket: each boundary's, and a last bucket's up to the longest pair.
    widths = {b - 1 for b in min_padding_boundaries(np.bincount(stats.lengths), 8)} | {int(stats.lengths.max())}
    assert shapes(fewest) == {(w, w) for w in widths} and len(widths) <= 9
    assert padding_fraction(fewest) < padding_fraction(equal)
    with pytest.raises(ValueError, match="bucket_method='shortest'"):
        make_translation_dataset(val_pairs, de_tokenizer, en_tokenizer, 8, bucket_method="shortest")


def test_pad_to_bucket_boundary_gives_few_shapes(val_pairs, de_tokenizer, en_tokenizer):
    ds = make_translation_dataset(
        val_pairs, de_tokenizer, en_tokenizer, 32, bucket_boundaries=[10, 16, 24],
        pad_to_bucket_boundary=True,
    )  # fmt: skip
    shapes = {(x.shape[1], y_in.shape[1]) for (x, y_in), _ in ds.as_numpy_iterator()}
    longest = max(max(len(x), len(y_in)) for x, y_in, _ in rows(ds))
    assert shapes <= {(9, 9), (15, 15), (23, 23), (longest, longest)}, shapes
    assert len(rows(ds)) == 1014
    with pytest.raises(ValueError, match="pad_to_bucket_boundary"):
        make_translation_dataset(
            val_pairs, de_tokenizer, en_tokenizer, 8, pad_to_bucket_boundary=True
        )


@pytest.mark.parametrize("buckets", [1, np.int64(3)])
def test_a_number_of_buckets_bounds_the_shapes(val_pairs, de_tokenizer, en_tokenizer, buckets):
    ds, stats = make_translation_dataset(
        val_pairs, de_tokenizer, en_tokenizer, 32, bucket_boundaries=buckets, pad_to_bucket_boundary=True,
        return_stats=True,
    )  # fmt: skip
    shapes = {(x.shape[1], y_in.shape[1]) for (x, y_in), _ in ds.as_numpy_iterator()}
    assert len(shapes) == buckets and all(a == b for a, b in shapes)
    assert max(shapes)[0] == stats.lengths.max()  # the last bucket reaches the longest pair
    assert len(rows(ds)) == 1014
    for wrong in (0, True):
        with pytest.raises(ValueError, match=f"bucket_boundaries={wrong}"):
            make_translation_dataset(val_pairs, de_tokenizer, en_tokenizer, 8, bucket_boundaries=wrong)


def test_shuffle_is_seeded(val_pairs, de_tokenizer, en_tokenizer):
    def first_batch(**kwargs):
        ds = make_translation_dataset(val_pairs, de_tokenizer, en_tokenizer, 16, **kwargs)
        return next(iter(ds))[0][0].numpy().tolist()

    assert first_batch(shuffle=True, seed=5) == first_batch(shuffle=True, seed=5)
    assert first_batch(shuffle=True, seed=5) != first_batch()


def test_auto_bucket_boundaries():
    lengths = np.repeat(np.arange(5, 45), 10)
    boundaries = auto_bucket_boundaries(lengths, num_buckets=4)
    assert boundaries == sorted(set(boundaries)) and len(boundaries) == 3
    counts = np.histogram(lengths, [0, *boundaries, 1000])[0]
    assert counts.min() >= 0.8 * len(lengths) / 4
    assert auto_bucket_boundaries([7] * 10) == []


def test_bad_arguments(val_pairs, de_tokenizer, en_tokenizer):
    args = (val_pairs, de_tokenizer, en_tokenizer)
    with pytest.raises(ValueError, match="batch_size=0"):
        make_translation_dataset(*args, 0)
    with pytest.raises(ValueError, match="on_long='cut'"):
        make_translation_dataset(*args, 8, on_long="cut")
    with pytest.raises(ValueError, match="max_length=2"):
        make_translation_dataset(*args, 8, max_length=2)
    with pytest.raises(ValueError, match=r"bucket_boundaries=\[8, 4\]"):
        make_translation_dataset(*args, 8, bucket_boundaries=[8, 4])
    with pytest.raises(ValueError, match="pairs"):
        make_translation_dataset(val_pairs.batch(2), de_tokenizer, en_tokenizer, 8)


_DISTRIBUTED = textwrap.dedent(
    """
    import json
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    import keras
    from keras_attention.data import SubwordTokenizer, load_dates, make_translation_dataset

    pairs = load_dates(1024, seed=0)
    source_tok = SubwordTokenizer.from_dataset(pairs.map(lambda s, t: s), 400)
    target_tok = SubwordTokenizer.from_dataset(pairs.map(lambda s, t: t), 400)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    ds = make_translation_dataset(
        pairs, source_tok, target_tok, batch_size=16, max_length=24, bucket_boundaries="auto",
        shuffle=True, seed=0, drop_remainder=True,
    )
    shapes = []
    for (x, y_in), y_out in strategy.experimental_distribute_dataset(ds):
        local = [strategy.experimental_local_results(v) for v in (x, y_in, y_out)]
        shapes.append([[list(t.shape) for t in tensors] for tensors in local])
        if len(shapes) == 4:
            break
    with strategy.scope():
        source = keras.Input((None,), dtype="int32")
        target = keras.Input((None,), dtype="int32")
        context = keras.layers.GlobalAveragePooling1D()(
            keras.layers.Embedding(source_tok.vocab_size, 16)(source)
        )
        hidden = keras.layers.Embedding(target_tok.vocab_size, 16)(target)
        hidden = hidden + keras.ops.expand_dims(context, 1)
        logits = keras.layers.Dense(target_tok.vocab_size)(hidden)
        model = keras.Model((source, target), logits)
        model.compile(
            "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
        )
    history = model.fit(ds, epochs=3, verbose=0, shuffle=False)
    print("RESULT", json.dumps({
        "replicas": strategy.num_replicas_in_sync, "shapes": shapes,
        "loss": history.history["loss"],
    }))
    """
)


def test_batches_per_replica_under_mirrored_strategy():
    # Logical devices must be set before TensorFlow starts: a fresh process.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-u", "-c", _DISTRIBUTED],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[0][len("RESULT ") :])
    assert result["replicas"] == 2
    assert len(result["shapes"]) == 4
    for x, y_in, y_out in result["shapes"]:
        assert len(x) == 2  # One tensor per replica ...
        for i in range(2):  # ... each with half of the global batch of 16.
            assert x[i][0] == y_in[i][0] == y_out[i][0] == 8
            assert y_in[i] == y_out[i]
    print(f"\nMirroredStrategy, 2 CPU replicas: losses {result['loss']}")
    assert result["loss"][-1] < result["loss"][0]


def test_batch_tokens_budget_per_bucket():
    """With a token budget, every batch holds at most `batch_tokens` padded tokens,
    and short pairs come in larger batches than long ones."""
    from keras_attention import data

    pairs = data.load_dates(600, "train", seed=5)
    source = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: s), 200)
    target = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: t), 40)
    ds = data.make_translation_dataset(
        pairs, source, target, batch_size=None, batch_tokens=256, bucket_boundaries=[10, 16, 24],
        pad_to_bucket_boundary=True,
    )
    sizes = {}
    for (x, y_in), _ in ds.as_numpy_iterator():
        assert x.shape[0] * max(x.shape[1], y_in.shape[1]) <= 256 + x.shape[1]
        sizes.setdefault(max(x.shape[1], y_in.shape[1]), set()).add(x.shape[0])
    lengths = sorted(sizes)
    assert max(sizes[lengths[0]]) > max(sizes[lengths[-1]])
    with pytest.raises(ValueError, match="batch_size=None, batch_tokens=None"):
        data.make_translation_dataset(pairs, source, target, batch_size=None)
    with pytest.raises(ValueError, match="batch_size=8, batch_tokens=100"):
        data.make_translation_dataset(pairs, source, target, batch_size=8, batch_tokens=100)
