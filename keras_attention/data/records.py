"""Prepare a corpus: tokenize it once into shuffled, sharded TFRecord files.

`write_prepared_corpus` streams sentence pairs through the tokenizers and writes:

    OUTPUT/
      manifest.json                 counts, shards, vocabulary hashes, settings
      source.vocab, target.vocab    the vocabularies (`SubwordTokenizer.save_vocabulary`)
      train-00000-of-00012.tfrecord ...
      valid.source, valid.target    raw validation/test text, if given (small)

Each record is one pair: little-endian integers `[n, x_1..x_n, y_1..y_m]`
(`uint16` when both vocabularies have at most 65,536 tokens, else `int32`),
the ids without [START]/[END]. Pairs longer than `max_length` are dropped
(and counted) here, so training reads only what it uses.

The shuffle is global in bounded memory: the first pass sends each pair to a
random shard, the second shuffles each shard in memory (one shard at a time),
so every shard is a random sample of the corpus. `data.prepared.PreparedCorpus`
reads the folder back for training.
"""

import math
import os
import time

import numpy as np
import tensorflow as tf

from keras_attention.base.corpus_files import sha256_of
from keras_attention.base.files import check_replaceable_folder, folder_replaced_atomically, write_json
from keras_attention.base.options import SHARD_SIZE
from keras_attention.base.validation import check_positive_int
from keras_attention.data.pipeline import _max_lengths
from keras_attention.data.prepared import (
    AUTOTUNE,
    FORMAT,
    MANIFEST,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    VERSION,
    is_prepared,
)
from keras_attention.data.text_files import logger


def write_prepared_corpus(
    pairs,
    source_tokenizer,
    target_tokenizer,
    output_dir,
    max_length,
    *,
    num_pairs=None,
    shard_size=SHARD_SIZE,
    seed=0,
    report=None,
    valid_pairs=None,
    test_pairs=None,
    metadata=None,
    overwrite=False,
):
    """Tokenize `pairs` once into shuffled TFRecord shards with a manifest.

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` string scalars (a
            streamed loader's output; it is read once).
        source_tokenizer: the source `SubwordTokenizer`.
        target_tokenizer: the target `SubwordTokenizer`.
        output_dir: str. A new or empty folder.
        max_length: int or `(source_max, target_max)`: longest `[START] x
            [END]` and `[START] y`; longer pairs are dropped and counted.
        num_pairs: int or None. About how many pairs `pairs` holds (sets the
            number of shards); defaults to `report.lines`.
        shard_size: int. Pairs per shard, about (the second pass holds one
            shard in memory). Defaults to 200,000.
        seed: int. The shuffle's seed. Defaults to 0.
        report: a `CorpusReport` the loader counts into; saved in the
            manifest. Defaults to None.
        valid_pairs: a small dataset of `(source, target)` strings, written
            into the folder as text (`valid.source`, `valid.target`) for
            validation. Defaults to None.
        test_pairs: the same for testing (`test.source`, ...). Defaults to
            None.
        metadata: dict of extra facts for the manifest (languages, ...).
        overwrite: bool. Replace a prepared corpus already in `output_dir`
            (only once the new one is complete). Defaults to False.

    Returns:
        The manifest (a dict), also written to `output_dir/manifest.json`.
    """
    final_dir = os.path.normpath(os.fspath(output_dir))
    check_output(final_dir, overwrite)
    _max_lengths(max_length)  # checks it before any work
    num_pairs = num_pairs if num_pairs is not None else (report.lines if report else None)
    if num_pairs is None:
        raise ValueError("`num_pairs` is needed when `report` has no line count. Received: num_pairs=None")
    shard_size = check_positive_int("shard_size", shard_size)
    # Written to a staging folder beside `final_dir`, which replaces it only once complete: a failure
    # or a kill never leaves a half-written corpus, and never costs the one being overwritten.
    with folder_replaced_atomically(final_dir) as staging:
        manifest = _write_corpus(pairs, source_tokenizer, target_tokenizer, staging, max_length, num_pairs,
                                 shard_size, seed, report, valid_pairs, test_pairs, metadata)
    logger.info("Prepared %d pairs in %d shards in %s (%.0f s).", manifest["pairs"], len(manifest["shards"]),
                final_dir, manifest["seconds"])
    return manifest


def _write_corpus(pairs, source_tokenizer, target_tokenizer, output_dir, max_length, num_pairs, shard_size,
                  seed, report, valid_pairs, test_pairs, metadata):
    """Write shards, vocabularies, text splits and manifest into `output_dir`; return the manifest."""
    max_source, max_target = _max_lengths(max_length)
    num_shards = max(1, math.ceil(num_pairs / shard_size))
    started = time.time()
    source_tokenizer.save_vocabulary(os.path.join(output_dir, SOURCE_VOCAB))
    target_tokenizer.save_vocabulary(os.path.join(output_dir, TARGET_VOCAB))
    dtype = "uint16" if max(source_tokenizer.vocab_size, target_tokenizer.vocab_size) <= 65536 else "int32"
    names = [f"train-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    longest = max(max_source, max_target)
    histograms = np.zeros((num_shards, longest + 1), np.int64)
    too_long = _write_random_shards(pairs, source_tokenizer, target_tokenizer, output_dir, names,
                                    max_source, max_target, dtype, histograms, seed)
    for index, name in enumerate(names):  # second pass: one shard in memory at a time
        _shuffle_shard(os.path.join(output_dir, name), seed + 1 + index)
    counts = report.to_dict() if report else {}  # before the small splits are read
    splits = {name: _write_text(pairs, output_dir, name) if pairs is not None else None
              for name, pairs in (("valid", valid_pairs), ("test", test_pairs))}
    counts["too_long_tokens"] = too_long
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "pairs": int(histograms.sum()),
        "counts": counts,
        "dtype": dtype,
        "max_length": [max_source, max_target],
        "seed": seed,
        "shards": [{"file": name, "pairs": int(h.sum()), "length_histogram": _trim(h)}
                   for name, h in zip(names, histograms)],
        "source_vocabulary": _vocabulary_entry(output_dir, SOURCE_VOCAB, source_tokenizer),
        "target_vocabulary": _vocabulary_entry(output_dir, TARGET_VOCAB, target_tokenizer),
        "tokenizer": {"lower_case": source_tokenizer.lower_case,
                      "normalization": source_tokenizer.normalization},
        "valid": splits["valid"],
        "test": splits["test"],
        "seconds": round(time.time() - started, 1),
        **(metadata or {}),
    }
    if not manifest["pairs"]:
        raise ValueError(f"No pair was kept (all over max_length={max_length} or skipped); nothing prepared.")
    write_json(os.path.join(output_dir, MANIFEST), manifest, indent=1)
    return manifest


def _write_random_shards(pairs, source_tok, target_tok, folder, names, max_source, max_target,
                         dtype, histograms, seed):
    """First pass: tokenize, drop long pairs, send each pair to a random shard."""

    def tokenize(source, target):
        x, y = source_tok.tokenize(source), target_tok.tokenize(target)
        return x.flat_values, x.row_splits, y.flat_values, y.row_splits

    batches = pairs.batch(1024).map(tokenize, num_parallel_calls=AUTOTUNE).prefetch(4)
    rng = np.random.default_rng(seed)
    writers = [tf.io.TFRecordWriter(os.path.join(folder, name)) for name in names]
    little = np.dtype(dtype).newbyteorder("<")
    too_long = 0
    try:
        for xv, xs, yv, ys in batches.as_numpy_iterator():
            x_len, y_len = np.diff(xs), np.diff(ys)
            keep = (x_len + 2 <= max_source) & (y_len + 1 <= max_target)
            too_long += int((~keep).sum())
            shards = rng.integers(len(names), size=len(x_len))
            lengths = np.maximum(x_len + 2, y_len + 1)
            for i in np.flatnonzero(keep):
                record = np.concatenate(([x_len[i]], xv[xs[i] : xs[i + 1]], yv[ys[i] : ys[i + 1]]))
                writers[shards[i]].write(record.astype(little).tobytes())
                histograms[shards[i], lengths[i]] += 1
    finally:
        for writer in writers:
            writer.close()
    return too_long


def _shuffle_shard(path, seed):
    records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    order = np.random.default_rng(seed).permutation(len(records))
    partial = path + ".partial"
    with tf.io.TFRecordWriter(partial) as writer:
        for i in order:
            writer.write(records[i])
    os.replace(partial, path)


def check_output(folder, overwrite=False):
    """Raise unless `write_prepared_corpus` may write to `folder` (new, empty, or a corpus to overwrite)."""
    check_replaceable_folder(folder, is_prepared, "prepared corpus", overwrite)


def _vocabulary_entry(folder, name, tokenizer):
    return {"file": name, "size": tokenizer.vocab_size, "sha256": sha256_of(os.path.join(folder, name))}


def _write_text(pairs, folder, name):
    """Write a small split as two text files, `NAME.source` and `NAME.target`, in the staging `folder`."""
    names = [f"{name}.source", f"{name}.target"]
    paths = [os.path.join(folder, n) for n in names]
    with open(paths[0], "w", encoding="utf-8") as src, open(paths[1], "w", encoding="utf-8") as tgt:
        for pair in pairs.as_numpy_iterator():
            src.write(" ".join(pair[0].decode("utf-8").split()) + "\n")
            tgt.write(" ".join(pair[1].decode("utf-8").split()) + "\n")
    return names


def _trim(histogram):
    nonzero = np.flatnonzero(histogram)
    return histogram[: nonzero.max() + 1].tolist() if nonzero.size else []


__all__ = ["check_output", "write_prepared_corpus"]
