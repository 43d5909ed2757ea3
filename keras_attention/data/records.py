"""A corpus tokenized once into shuffled, sharded TFRecord files, and the reader that trains from them.

`prepare_corpus` streams sentence pairs through the tokenizers and writes:

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
so every shard is a random sample of the corpus. `PreparedCorpus.dataset`
then reads the shards in a new random order each epoch, interleaved, through
a bounded shuffle buffer, buckets them by length and batches them by pairs or
by tokens. Under `MultiWorkerMirroredStrategy` each worker reads its own
shards (worker i reads shards i, i + workers, ...) when there are at least as
many shards as workers; otherwise every worker reads all shards and keeps its share of the
batches (`DATA`), with a warning.
"""

import json
import math
import os
import shutil
import time

import numpy as np
import tensorflow as tf

from keras_attention.data.pipeline import (
    _max_lengths,
    batch_by_length,
    bucket_sizes,
    final_boundaries,
)
from keras_attention.data.streaming import sha256_of
from keras_attention.data.text_files import logger
from keras_attention.data.tokenizers import SubwordTokenizer
from keras_attention.layers.validation import check_positive_int

MANIFEST = "manifest.json"
FORMAT = "keras-attention prepared corpus"
VERSION = 1
SOURCE_VOCAB, TARGET_VOCAB = "source.vocab", "target.vocab"
AUTOTUNE = tf.data.AUTOTUNE


def prepare_corpus(
    pairs,
    source_tokenizer,
    target_tokenizer,
    output_dir,
    max_length,
    *,
    num_pairs=None,
    shard_size=200_000,
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
    # Everything is written to a staging folder beside `final_dir`, which
    # replaces it only once complete: a failure or a kill never leaves a
    # half-written corpus, and never costs the one being overwritten.
    output_dir = final_dir + ".partial"
    shutil.rmtree(output_dir, ignore_errors=True)
    os.makedirs(output_dir)
    try:
        manifest = _write_corpus(pairs, source_tokenizer, target_tokenizer, output_dir, max_length, num_pairs,
                                 shard_size, seed, report, valid_pairs, test_pairs, metadata)
    except BaseException:
        shutil.rmtree(output_dir, ignore_errors=True)
        raise
    _install(output_dir, final_dir)
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
    _write_json(os.path.join(output_dir, MANIFEST), manifest)
    return manifest


def _install(staging, folder):
    """Put the complete corpus in `staging` at `folder`, replacing what `check_output` allowed."""
    previous = None
    if os.path.isdir(folder):
        previous = folder + ".old"
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(folder, previous)
    os.replace(staging, folder)
    if previous:
        shutil.rmtree(previous, ignore_errors=True)


def is_prepared(folder):
    """True if `folder` holds a prepared corpus (its manifest)."""
    return folder is not None and os.path.isfile(os.path.join(os.fspath(folder), MANIFEST))


class PreparedCorpus:
    """A folder written by `prepare_corpus`, checked, ready to make training batches.

    Args:
        folder: str. The prepared folder.

    Raises:
        ValueError: no or a broken manifest, a vocabulary file whose hash
            differs from the manifest's, or a missing shard (each named).

    Example:

    >>> corpus = PreparedCorpus("prepared/wmt14")  # doctest: +SKIP
    >>> ds = corpus.dataset(batch_tokens=4096, shuffle=True, seed=1)  # doctest: +SKIP
    >>> steps = corpus.steps_per_epoch(batch_tokens=4096)  # doctest: +SKIP
    """

    def __init__(self, folder):
        self.folder = os.fspath(folder)
        path = os.path.join(self.folder, MANIFEST)
        if not os.path.isfile(path):
            raise ValueError(f"{self.folder}: not a prepared corpus (no {MANIFEST}); "
                             "make one with `keras-attention prepare`.")
        try:
            with open(path, encoding="utf-8") as f:
                self.manifest = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: not valid JSON ({error}).") from None
        if self.manifest.get("format") != FORMAT or self.manifest.get("version") != VERSION:
            raise ValueError(f"{path}: not a version-{VERSION} manifest of `keras-attention prepare`.")
        for side in ("source_vocabulary", "target_vocabulary"):
            entry = self.manifest[side]
            vocab_path = os.path.join(self.folder, entry["file"])
            if not os.path.isfile(vocab_path):
                raise ValueError(f"{vocab_path}: missing (listed in {path}).")
            if sha256_of(vocab_path) != entry["sha256"]:
                raise ValueError(f"{vocab_path}: its SHA-256 differs from the manifest's: the "
                                 "vocabulary changed after the corpus was prepared.")
        self.files = [os.path.join(self.folder, shard["file"]) for shard in self.manifest["shards"]]
        missing = [f for f in self.files if not os.path.isfile(f)]
        if missing:
            raise ValueError(f"{missing[0]}: missing shard ({len(missing)} of {len(self.files)} "
                             f"shards listed in {path} are missing).")
        self.max_length = tuple(self.manifest["max_length"])

    @property
    def num_pairs(self):
        """Pairs in all shards."""
        return self.manifest["pairs"]

    def tokenizers(self):
        """`(source, target)` `SubwordTokenizer`s from the folder's vocabularies."""
        options = self.manifest["tokenizer"]
        return tuple(
            SubwordTokenizer.from_vocabulary_file(os.path.join(self.folder, self.manifest[side]["file"]),
                                                  **options)
            for side in ("source_vocabulary", "target_vocabulary")
        )

    def text_split(self, name):
        """`(source, target)` paths of the copied "valid" or "test" text, or None."""
        files = self.manifest.get(name)
        return tuple(os.path.join(self.folder, f) for f in files) if files else None

    def length_histogram(self, shards=None):
        """Pairs by length (the longer of `[START] x [END]` and `[START] y`), summed over shards."""
        shards = self.manifest["shards"] if shards is None else shards
        total = np.zeros(max(self.max_length) + 1, np.int64)
        for shard in shards:
            h = shard["length_histogram"]
            total[: len(h)] += h
        return total

    def bucket_boundaries(self, num_buckets=8):
        """About `num_buckets` equal-count buckets, from the manifest's histogram
        (the quantiles `auto_bucket_boundaries` would take of every length)."""
        histogram = self.length_histogram()
        cumulative = np.cumsum(histogram) / max(histogram.sum(), 1)
        quantiles = np.arange(1, num_buckets) / num_buckets
        cuts = {int(np.searchsorted(cumulative, q)) + 1 for q in quantiles}
        return sorted(c for c in cuts if c <= self.longest())

    def longest(self):
        """The longest pair's length (markers included)."""
        return int(np.flatnonzero(self.length_histogram()).max(initial=0))

    def steps_per_epoch(self, batch_size=None, batch_tokens=None, bucket_boundaries="auto",
                        num_workers=1, pad_to_bucket_boundary=True):
        """Full batches one pass gives (the remainder of each bucket is dropped).

        Exact for one worker, as bucketing puts every pair of a length in the
        same bucket. Under `MultiWorkerMirroredStrategy` a step takes
        `1 / num_workers` of a batch from each worker. When the workers read
        their own shards, each batch a worker makes lasts `num_workers` steps,
        and the count is the smallest worker's, so that every worker has data
        for every step of a (repeated) epoch. When every worker reads all
        shards, each keeps its part of every batch: one step a batch.
        """
        boundaries = self._boundaries(bucket_boundaries, pad_to_bucket_boundary)
        sizes = bucket_sizes(boundaries, self.longest(), batch_size, batch_tokens)
        shards = self.manifest["shards"]
        groups = [shards[w::num_workers] for w in range(num_workers)] if self._file_sharded(num_workers) else [shards]
        steps = []
        for group in groups:
            per_bucket = np.zeros(len(boundaries) + 1, np.int64)
            histogram = self.length_histogram(group)
            lengths = np.arange(histogram.size)
            np.add.at(per_bucket, np.searchsorted(boundaries, lengths, side="right"), histogram)
            batches = sum(int(n) // size for n, size in zip(per_bucket, sizes))
            steps.append(batches * num_workers if self._file_sharded(num_workers) else batches)
        return min(steps)

    def dataset(self, batch_size=None, batch_tokens=None, bucket_boundaries="auto",
                pad_to_bucket_boundary=True, shuffle=True, shuffle_buffer=16384, seed=None,
                num_workers=1, worker_index=0, repeat=False, cycle_length=16):
        """Training batches `((source_ids, target_in), target_out)` from the shards.

        Args:
            batch_size: int or None. Pairs per (global) batch; or give
                `batch_tokens`.
            batch_tokens: int or None. A token budget per batch.
            bucket_boundaries: "auto" (from the manifest's histogram) or a
                sorted list of lengths. Defaults to "auto".
            pad_to_bucket_boundary: bool. Pad batches to their bucket's
                boundary (few shapes, for XLA). Defaults to True.
            shuffle: bool. New shard order and a shuffle buffer each epoch.
                Defaults to True.
            shuffle_buffer: int. Pairs in the shuffle buffer. Defaults to
                16384.
            seed: int or None. Defaults to None.
            num_workers: int. Workers of a multi-worker strategy. Defaults
                to 1.
            worker_index: int. This worker's index in `[0, num_workers)`.
                With at least as many shards as workers, the worker reads
                shards `worker_index`, `worker_index + num_workers`, ... and
                nothing else (TensorFlow's FILE auto-sharding cannot see
                through length bucketing, so the shards are split here and
                auto-sharding is off). With fewer shards, every worker reads
                everything and the strategy keeps its share of the batches
                (DATA auto-sharding), with a warning. Defaults to 0.
            repeat: bool. Repeat forever (then give `fit` the
                `steps_per_epoch`). Defaults to False.
            cycle_length: int. Shards read at once. Defaults to 16.

        Returns:
            A `tf.data.Dataset` of int32 batches; full batches only.
        """
        if (batch_size is None) == (batch_tokens is None):
            raise ValueError("Give exactly one of `batch_size` and `batch_tokens`. "
                             f"Received: batch_size={batch_size!r}, batch_tokens={batch_tokens!r}")
        check_positive_int("batch_size" if batch_size is not None else "batch_tokens",
                           batch_size if batch_size is not None else batch_tokens)
        check_positive_int("num_workers", num_workers)
        if not 0 <= worker_index < num_workers:
            raise ValueError(f"`worker_index` must be in [0, num_workers={num_workers}). "
                             f"Received: worker_index={worker_index!r}")
        boundaries = self._boundaries(bucket_boundaries, pad_to_bucket_boundary)
        file_sharded = self._file_sharded(num_workers)
        paths = self.files[worker_index::num_workers] if file_sharded else self.files
        files = tf.data.Dataset.from_tensor_slices(paths)
        if shuffle:
            files = files.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
        records = files.interleave(tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(paths)),
                                   block_length=1, num_parallel_calls=AUTOTUNE)
        if shuffle:
            records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        source_tok, target_tok = self.tokenizers()
        parse = _parser(self.manifest["dtype"], source_tok, target_tok)
        triples = records.map(parse, num_parallel_calls=AUTOTUNE)
        batches = batch_by_length(triples, batch_size, batch_tokens, boundaries, self.longest(),
                                  pad_to_bucket_boundary, drop_remainder=True)
        batches = batches.map(lambda x, y_in, y_out: ((x, y_in), y_out))
        if repeat:
            batches = batches.repeat()
        options = tf.data.Options()
        policy = tf.data.experimental.AutoShardPolicy
        options.experimental_distribute.auto_shard_policy = policy.OFF if file_sharded else policy.DATA
        if num_workers > 1 and not file_sharded:
            logger.warning("%d shards for %d workers: every worker reads every shard and keeps its "
                           "share of the batches. Prepare with a smaller --shard-size for one "
                           "shard a worker at least.", len(self.files), num_workers)
        return batches.with_options(options).prefetch(AUTOTUNE)

    def _file_sharded(self, num_workers):
        return num_workers > 1 and len(self.files) >= num_workers

    def _boundaries(self, bucket_boundaries, pad_to_bucket_boundary):
        if isinstance(bucket_boundaries, str) and bucket_boundaries == "auto":
            bucket_boundaries = self.bucket_boundaries()
        return final_boundaries(bucket_boundaries, self.longest(), pad_to_bucket_boundary)


def read_records(path, dtype):
    """`(source_ids, target_ids)` NumPy pairs of one shard file (for tests and tools)."""
    pairs = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        ids = np.frombuffer(record, dtype=np.dtype(dtype).newbyteorder("<")).astype(np.int32)
        pairs.append((ids[1 : 1 + ids[0]], ids[1 + ids[0] :]))
    return pairs


def _parser(dtype, source_tok, target_tok):
    raw_dtype = {"uint16": tf.uint16, "int32": tf.int32}[dtype]
    src_sos, src_eos = source_tok.start_id, source_tok.end_id
    sos, eos = target_tok.start_id, target_tok.end_id

    def parse(record):  # bytes -> [START] x [END], [START] y, y [END]
        ids = tf.cast(tf.io.decode_raw(record, raw_dtype, little_endian=True), tf.int32)
        n = ids[0]
        x, y = ids[1 : 1 + n], ids[1 + n :]
        x = tf.concat([[src_sos], x, [src_eos]], axis=0)
        return x, tf.concat([[sos], y], axis=0), tf.concat([y, [eos]], axis=0)

    return parse


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
    """Raise `ValueError` unless `prepare_corpus` may write to `folder` (new, empty, or overwritable)."""
    if os.path.isfile(folder):
        raise ValueError(f"{folder}: is a file; give a folder for the prepared corpus.")
    if is_prepared(folder) and not overwrite:
        raise ValueError(f"{folder}: already holds a prepared corpus; choose another folder or "
                         "pass overwrite=True (--overwrite).")
    if os.path.isdir(folder) and os.listdir(folder) and not is_prepared(folder):
        raise ValueError(f"{folder}: the folder is not empty; give a new or empty folder.")


def _vocabulary_entry(folder, name, tokenizer):
    return {"file": name, "size": tokenizer.vocab_size, "sha256": sha256_of(os.path.join(folder, name))}


def _write_text(pairs, folder, name):
    """Write a small split as two text files, `NAME.source` and `NAME.target`, in `folder`."""
    names = [f"{name}.source", f"{name}.target"]
    partial = [os.path.join(folder, n + ".partial") for n in names]
    with open(partial[0], "w", encoding="utf-8") as src, open(partial[1], "w", encoding="utf-8") as tgt:
        for pair in pairs.as_numpy_iterator():
            src.write(" ".join(pair[0].decode("utf-8").split()) + "\n")
            tgt.write(" ".join(pair[1].decode("utf-8").split()) + "\n")
    for path, final in zip(partial, names):
        os.replace(path, os.path.join(folder, final))
    return names


def _trim(histogram):
    nonzero = np.flatnonzero(histogram)
    return histogram[: nonzero.max() + 1].tolist() if nonzero.size else []


def _write_json(path, value):
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1)
    os.replace(partial, path)


__all__ = ["PreparedCorpus", "is_prepared", "prepare_corpus", "read_records"]
