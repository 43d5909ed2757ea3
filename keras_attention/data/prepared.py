"""`PreparedCorpus`: training batches read from a folder written by `write_prepared_corpus`.

`PreparedCorpus.dataset` reads the shards in a new random order each epoch,
interleaved, through a bounded shuffle buffer, buckets them by length and
batches them by pairs or by tokens. Under `MultiWorkerMirroredStrategy` each
worker reads its own shards (worker i reads shards i, i + workers, ...) when
there are at least as many shards as workers; otherwise every worker reads
all shards and keeps its share of the batches (`DATA`), with a warning.
The folder's layout and record format are described in `data.records`.
"""

import json
import os

import numpy as np
import tensorflow as tf

from keras_attention.base.corpus_files import MANIFEST, is_prepared, sha256_of
from keras_attention.base.options import BUCKET_METHODS, DEFAULT_BUCKET_METHOD
from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.data.bucketing import batch_by_length, bucket_sizes, final_boundaries, min_padding_boundaries
from keras_attention.data.text_files import logger
from keras_attention.data.tokenizers import SubwordTokenizer

FORMAT = "keras-attention prepared corpus"
VERSION = 1
SOURCE_VOCAB, TARGET_VOCAB = "source.vocab", "target.vocab"
AUTOTUNE = tf.data.AUTOTUNE


class PreparedCorpus:
    """A folder written by `write_prepared_corpus`, checked, ready to make training batches.

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

    def bucket_boundaries(self, num_buckets=8, method=DEFAULT_BUCKET_METHOD):
        """About `num_buckets` buckets from the manifest's histogram, placed as
        `auto_bucket_boundaries(every length, num_buckets, method)` would."""
        histogram = self.length_histogram()
        if check_choice("method", method, BUCKET_METHODS) == "min_padding":
            return min_padding_boundaries(histogram, num_buckets)
        cumulative = np.cumsum(histogram) / max(histogram.sum(), 1)
        quantiles = np.arange(1, num_buckets) / num_buckets
        cuts = {int(np.searchsorted(cumulative, q)) + 1 for q in quantiles}
        return sorted(c for c in cuts if c <= self.longest())

    def longest(self):
        """The longest pair's length (markers included)."""
        return int(np.flatnonzero(self.length_histogram()).max(initial=0))

    def steps_per_epoch(self, batch_size=None, batch_tokens=None, bucket_boundaries="auto",
                        num_workers=1, pad_to_bucket_boundary=True, bucket_method=DEFAULT_BUCKET_METHOD):
        """Full batches one pass gives (the remainder of each bucket is dropped).

        Exact for one worker, as bucketing puts every pair of a length in the
        same bucket. Under `MultiWorkerMirroredStrategy` a step takes
        `1 / num_workers` of a batch from each worker. When the workers read
        their own shards, each batch a worker makes lasts `num_workers` steps,
        and the count is the smallest worker's, so that every worker has data
        for every step of a (repeated) epoch. When every worker reads all
        shards, each keeps its part of every batch: one step a batch.
        """
        boundaries = self._boundaries(bucket_boundaries, pad_to_bucket_boundary, bucket_method)
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
                num_workers=1, worker_index=0, repeat=False, cycle_length=16, bucket_method=DEFAULT_BUCKET_METHOD):
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
            bucket_method: how "auto" places the boundaries,
                `"equal_count"` or `"min_padding"` (see
                `make_translation_dataset`). Defaults to `"equal_count"`.

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
        boundaries = self._boundaries(bucket_boundaries, pad_to_bucket_boundary, bucket_method)
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

    def _boundaries(self, bucket_boundaries, pad_to_bucket_boundary, bucket_method):
        if isinstance(bucket_boundaries, str) and bucket_boundaries == "auto":
            bucket_boundaries = self.bucket_boundaries(method=bucket_method)
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


__all__ = ["PreparedCorpus", "is_prepared", "read_records"]
