"""tf.data pipelines from sentence pairs to padded batches for `model.fit`.

tokenize -> cache -> drop or truncate long pairs -> add [START]/[END] ->
shuffle -> bucket by length (or not) -> pad with 0 -> batch -> prefetch, giving
`((source_ids, target_in), target_out)` with `target_in = [START] y` and
`target_out = y [END]`, both int32 `(batch, T)`.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_attention.base.options import BUCKET_METHODS, DEFAULT_BUCKET_METHOD
from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.data.bucketing import auto_bucket_boundaries, batch_by_length
from keras_attention.data.streaming import assert_token_lengths
from keras_attention.data.text_files import logger

AUTOTUNE = tf.data.AUTOTUNE


@dataclasses.dataclass
class LengthStats:
    """What the pipeline saw; lengths count the [START]/[END] tokens added.

    Attributes:
        pairs: number of pairs read.
        long_pairs: pairs over the maximum length on either side.
        action: `"drop"` or `"truncate"`: what happened to the long pairs.
        max_source_length: longest source seen, `[START] x [END]`.
        max_target_length: longest target seen, `[START] y` (= `y [END]`).
        lengths: int array, per kept pair, the longer of its two sides after
            any truncation (the length bucketing uses).
        sampled: True when these figures come from the first pairs only
            (`stats_sample`), not from the whole corpus.
    """

    pairs: int
    long_pairs: int
    action: str
    max_source_length: int
    max_target_length: int
    lengths: np.ndarray = dataclasses.field(repr=False)
    sampled: bool = False

    def __str__(self):
        verb = "dropped" if self.action == "drop" else "truncated"
        return (
            f"{'in a sample of the first ' if self.sampled else ''}{self.pairs} pairs, "
            f"{self.long_pairs} over the maximum length {verb} "
            f"(longest source {self.max_source_length}, target {self.max_target_length} tokens)"
        )


def make_translation_dataset(
    pairs,
    source_tokenizer,
    target_tokenizer,
    batch_size,
    max_length=None,
    on_long="drop",
    bucket_boundaries=None,
    pad_to_bucket_boundary=False,
    shuffle=False,
    seed=None,
    cache=True,
    drop_remainder=False,
    return_stats=False,
    batch_tokens=None,
    stats_sample=None,
    report=None,
    strict=False,
    bucket_method=DEFAULT_BUCKET_METHOD,
):
    """Turn a dataset of sentence pairs into batches for a translation model.

    The source gets `[START] x [END]`; the target gives `target_in = [START] y`
    and `target_out = y [END]`. Pairs longer than `max_length` are dropped or
    truncated; how many is logged (a warning when any) and returned on request.
    One pass over the data happens here to count lengths; with `cache=True`
    it also fills the cache, so tokenizing happens once. For a corpus too
    large to hold, pass `cache=False` and `stats_sample=N`: the lengths (for
    "auto" buckets and the statistics) then come from the first N pairs, and
    nothing held in memory grows with the corpus.

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` string scalars, as the
            loaders of this package return.
        source_tokenizer: a `SubwordTokenizer` for the source language.
        target_tokenizer: a `SubwordTokenizer` for the target language.
        batch_size: int or None. Pairs per batch (the global batch under a
            strategy). Give this or `batch_tokens`.
        max_length: int, `(source_max, target_max)` or None. Longest allowed
            `source_ids` and `target_in` (markers included). None: no limit.
            Defaults to None.
        on_long: `"drop"` or `"truncate"`. Defaults to `"drop"`.
        bucket_boundaries: None (pad each batch to its longest pair), a
            sorted list of int lengths, `"auto"` (about 8 buckets with equal
            numbers of pairs) or an int n (about n such buckets; 1 puts every
            pair in one bucket). Batches hold pairs of one bucket only.
            Defaults to None.
        bucket_method: how "auto" or a number of buckets places the
            boundaries: `"equal_count"` (about equal numbers of pairs a
            bucket) or `"min_padding"` (the fewest padded tokens for that
            many buckets; `data.auto_bucket_boundaries`). Defaults to
            `"equal_count"`.
        pad_to_bucket_boundary: bool. Pad every batch of a bucket to the
            bucket's largest length (boundary - 1) rather than to its longest
            pair, so that batches take a few fixed shapes (fewer retraces and
            XLA compilations, more padding). Needs `bucket_boundaries`.
            Defaults to False.
        shuffle: bool or int. Shuffle pairs each epoch; an int sets the
            buffer size (True: 16384). Defaults to False.
        seed: int. Shuffle seed. Defaults to None.
        cache: bool. Keep the token ids in memory after the first pass.
            Defaults to True.
        drop_remainder: bool. Drop the last, smaller batch (of each bucket).
            Defaults to False.
        return_stats: bool. Also return a `LengthStats`. Defaults to False.
        batch_tokens: int or None. Instead of `batch_size`: a budget of tokens
            per batch; each bucket (bucketing is then on, "auto" by default)
            gets `batch_tokens // its longest length` pairs, so short pairs
            come in larger batches. Defaults to None.
        stats_sample: int or None. Compute the length statistics from the
            first `stats_sample` pairs only (a bounded look-ahead) instead of
            a whole pass. Defaults to None (whole pass).
        report: a `streaming.CorpusReport` whose `too_long_tokens` counter
            counts the pairs dropped for length as they stream by. Defaults to
            None.
        strict: bool. A pair over `max_length` is an error instead of being
            dropped; `pairs` must then carry locations (a third element, as
            the loaders give with `with_locations=True`), which the error
            names. Defaults to False.

    Returns:
        A `tf.data.Dataset` of `((source_ids, target_in), target_out)` int32
        batches padded with 0; `(dataset, stats)` if `return_stats`.

    Example:

    >>> ds = make_translation_dataset(pairs, en_tok, de_tok, batch_size=64,
    ...                               max_length=64, bucket_boundaries="auto",
    ...                               shuffle=True, seed=1)  # doctest: +SKIP
    >>> steps = sum(1 for _ in ds)  # batches in one pass  # doctest: +SKIP
    >>> model.fit(ds.repeat(), steps_per_epoch=steps, epochs=10)  # doctest: +SKIP

    (A repeated dataset is read through one iterator for all epochs; given
    the finite one, Keras makes an iterator each epoch, and deleting one can
    wait up to a minute for its `tf.data` autotuning thread.)
    """
    bucket_boundaries, max_source, max_target = _check_arguments(
        pairs, strict, batch_size, batch_tokens, bucket_boundaries, on_long, max_length,
        pad_to_bucket_boundary, stats_sample, bucket_method)
    sos, eos = target_tokenizer.start_id, target_tokenizer.end_id
    src_sos, src_eos = source_tokenizer.start_id, source_tokenizer.end_id

    ids = _token_ids(pairs, source_tokenizer, target_tokenizer, max_source, max_target, max_length, on_long,
                     strict, report)
    if cache:
        ids = ids.cache()
    stats = _length_stats(ids if stats_sample is None else ids.take(stats_sample),
                          max_source, max_target, on_long, sampled=stats_sample is not None)
    _report(stats, max_length)

    if on_long == "drop":

        def short_enough(x, y):
            return (tf.size(x) + 2 <= max_source) & (tf.size(y) + 1 <= max_target)

        ids = ids.filter(short_enough)

    def add_markers(x, y):
        if on_long == "truncate":
            x, y = x[: max_source - 2], y[: max_target - 1]
        x = tf.concat([[src_sos], x, [src_eos]], axis=0)
        return x, tf.concat([[sos], y], axis=0), tf.concat([y, [eos]], axis=0)

    ds = ids.map(add_markers, num_parallel_calls=AUTOTUNE)
    if shuffle:
        buffer = 16384 if shuffle is True else check_positive_int("shuffle", shuffle)
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    if isinstance(bucket_boundaries, str) and bucket_boundaries == "auto":
        bucket_boundaries = auto_bucket_boundaries(stats.lengths, method=bucket_method)
    elif isinstance(bucket_boundaries, int):  # a number of buckets, checked above
        bucket_boundaries = auto_bucket_boundaries(stats.lengths, num_buckets=bucket_boundaries, method=bucket_method)
    longest = int(stats.lengths.max(initial=0))  # longest pair, markers included
    if stats.sampled and max_length is not None:  # a longer pair may come after the sample
        longest = max(longest, min(max(max_source, max_target), np.iinfo(np.int32).max - 1))
    ds = batch_by_length(ds, batch_size, batch_tokens, bucket_boundaries, longest,
                         pad_to_bucket_boundary, drop_remainder)

    def to_model_inputs(x, y_in, y_out):
        return (x, y_in), y_out

    ds = ds.map(to_model_inputs).prefetch(AUTOTUNE)
    return (ds, stats) if return_stats else ds


def _check_arguments(pairs, strict, batch_size, batch_tokens, bucket_boundaries, on_long, max_length,
                     pad_to_bucket_boundary, stats_sample, bucket_method):
    """`make_translation_dataset`'s argument checks; returns `(bucket_boundaries, max_source, max_target)`."""
    located = _check_pairs(pairs)
    if strict and not located:
        raise ValueError("`strict=True` needs pairs with locations (load them with "
                         "`with_locations=True`). Received: pairs with 2 elements")
    if (batch_size is None) == (batch_tokens is None):
        raise ValueError(
            "Give exactly one of `batch_size` (pairs) and `batch_tokens` (a token budget). "
            f"Received: batch_size={batch_size!r}, batch_tokens={batch_tokens!r}"
        )
    if batch_size is not None:
        check_positive_int("batch_size", batch_size)
    else:
        check_positive_int("batch_tokens", batch_tokens)
        bucket_boundaries = "auto" if bucket_boundaries is None else bucket_boundaries
    check_choice("on_long", on_long, ("drop", "truncate"))
    check_choice("bucket_method", bucket_method, BUCKET_METHODS)
    if isinstance(bucket_boundaries, np.integer):
        bucket_boundaries = int(bucket_boundaries)
    if isinstance(bucket_boundaries, int):  # a number of buckets (a bool is refused here too)
        check_positive_int("bucket_boundaries", bucket_boundaries)
    max_source, max_target = _max_lengths(max_length)
    if pad_to_bucket_boundary and bucket_boundaries is None:
        raise ValueError(
            "`pad_to_bucket_boundary=True` needs `bucket_boundaries` (a list or 'auto'). "
            "Received: bucket_boundaries=None"
        )
    if pad_to_bucket_boundary and stats_sample is not None and max_length is None:
        raise ValueError(
            "`pad_to_bucket_boundary=True` with `stats_sample` needs `max_length` (the sample "
            "cannot tell the longest pair). Received: max_length=None"
        )
    return bucket_boundaries, max_source, max_target


def _token_ids(pairs, source_tokenizer, target_tokenizer, max_source, max_target, max_length, on_long, strict,
               report):
    """Pairs of strings -> pairs of id vectors (no markers), tokenized 1,024 at a time.

    Pairs over the maximum length are counted into `report`, or (`strict`)
    stop the pipeline with their location; they are dropped or cut later.
    """

    @tf.autograph.experimental.do_not_convert  # graph ops only: AutoGraph's conversion would only slow tracing
    def tokenize(source, target, *location):  # (B,) strings -> (B, None) ids
        x, y = source_tokenizer.tokenize(source), target_tokenizer.tokenize(target)
        if on_long == "truncate" or (not strict and report is None):
            return x, y
        long = (x.row_lengths() + 2 > max_source) | (y.row_lengths() + 1 > max_target)
        checks = [report.add("too_long_tokens", tf.reduce_sum(tf.cast(long, tf.int64)))] if report else []
        if strict:
            checks.append(assert_token_lengths(long, location[0], f"longer than max_length={max_length} tokens"))
        with tf.control_dependencies(checks):
            return tf.identity(x), tf.identity(y)

    def densify(x, y):  # Ragged specs of rank 0 -> plain tensors.
        return tf.convert_to_tensor(x), tf.convert_to_tensor(y)

    return pairs.batch(1024).map(tokenize, num_parallel_calls=AUTOTUNE).unbatch().map(densify)


def _length_stats(ids, max_source, max_target, on_long, sampled=False):
    def sizes(x, y):
        return tf.size(x) + 2, tf.size(y) + 1

    source, target = [], []
    for s, t in ids.map(sizes).batch(4096).as_numpy_iterator():
        source.append(s)
        target.append(t)
    source = np.concatenate(source) if source else np.zeros([0], np.int32)
    target = np.concatenate(target) if target else np.zeros([0], np.int32)
    long = (source > max_source) | (target > max_target)
    if on_long == "drop":
        kept = np.maximum(source[~long], target[~long])
    else:
        kept = np.maximum(np.minimum(source, max_source), np.minimum(target, max_target))
    return LengthStats(
        pairs=int(source.size),
        long_pairs=int(long.sum()),
        action=on_long,
        max_source_length=int(source.max(initial=0)),
        max_target_length=int(target.max(initial=0)),
        lengths=kept,
        sampled=sampled,
    )


def _report(stats, max_length):
    if stats.long_pairs:
        logger.warning("Translation pairs (max_length=%s): %s.", max_length, stats)
    else:
        logger.info("Translation pairs (max_length=%s): %s.", max_length, stats)


def _max_lengths(max_length):
    if max_length is None:
        return np.iinfo(np.int32).max, np.iinfo(np.int32).max
    if isinstance(max_length, (tuple, list)) and len(max_length) == 2:
        source, target = max_length
    else:
        source = target = max_length
    for value in (source, target):
        if isinstance(value, bool) or not isinstance(value, int) or value < 3:
            raise ValueError(
                "`max_length` must be None, an int >= 3 or a pair of them (room for "
                f"[START], [END] and one token). Received: max_length={max_length!r}"
            )
    return source, target


def _check_pairs(pairs):
    spec = getattr(pairs, "element_spec", None)
    ok = (
        isinstance(pairs, tf.data.Dataset)
        and isinstance(spec, tuple)
        and len(spec) in (2, 3)
        and all(isinstance(s, tf.TensorSpec) and s.dtype == tf.string for s in spec)
        and all(s.shape.rank == 0 for s in spec)
    )
    if not ok:
        raise ValueError(
            "`pairs` must be a tf.data.Dataset of (source, target) string scalars "
            "(or (source, target, location)). "
            f"Received: pairs={type(pairs).__name__} with element_spec={spec}"
        )
    return len(spec) == 3
