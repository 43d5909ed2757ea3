"""Batching by length: bucket boundaries, pairs per bucket, padded batches.

Pairs of similar length go in the same batch so little of it is padding. A
pair's length is the longer of its source and its target input. Used by
`make_translation_dataset` and by prepared corpora (`PreparedCorpus`).
"""

import numpy as np
import tensorflow as tf

from keras_attention.base.options import BUCKET_METHODS, DEFAULT_BUCKET_METHOD
from keras_attention.base.validation import check_choice, check_positive_int


def bucket_sizes(bucket_boundaries, longest, batch_size=None, batch_tokens=None):
    """Pairs per batch in each bucket: `batch_size` everywhere, or as many as
    fit `batch_tokens` at the bucket's longest length (the last bucket's
    longest is `longest`)."""
    if batch_tokens is None:
        return [batch_size] * (len(bucket_boundaries) + 1)
    longest_in_bucket = [b - 1 for b in bucket_boundaries] + [max(longest, 1)]
    return [max(1, batch_tokens // max(n, 1)) for n in longest_in_bucket]


def final_boundaries(bucket_boundaries, longest, pad_to_bucket_boundary):
    """The checked boundaries `batch_by_length` uses (a last bucket up to the
    longest pair is added when batches are padded to their boundary)."""
    bucket_boundaries = _check_boundaries(bucket_boundaries)
    if pad_to_bucket_boundary and longest >= max(bucket_boundaries, default=0):
        bucket_boundaries.append(longest + 1)  # A last bucket up to the longest pair.
    return bucket_boundaries


def batch_by_length(ds, batch_size, batch_tokens, bucket_boundaries, longest,
                    pad_to_bucket_boundary=False, drop_remainder=False):
    """Batch `(x, y_in, y_out)` id triples, padded with 0, grouped by length or not.

    Args:
        ds: a `tf.data.Dataset` of three int32 vectors.
        batch_size: int or None. Pairs per batch (or give `batch_tokens`).
        batch_tokens: int or None. A token budget per batch; see
            `bucket_sizes`.
        bucket_boundaries: None or a sorted list of lengths (already
            resolved: no "auto"). A pair's length is the longer of `x` and
            `y_in`.
        longest: int. The longest pair's length (markers included).
        pad_to_bucket_boundary, drop_remainder: as in `make_translation_dataset`.

    Returns:
        The batched `tf.data.Dataset` of `(x, y_in, y_out)`.
    """
    if not (bucket_boundaries or pad_to_bucket_boundary):
        return ds.padded_batch(batch_size, drop_remainder=drop_remainder)
    bucket_boundaries = final_boundaries(bucket_boundaries, longest, pad_to_bucket_boundary)

    def pair_length(x, y_in, y_out):
        return tf.maximum(tf.size(x), tf.size(y_in))

    return ds.bucket_by_sequence_length(
        pair_length,
        bucket_boundaries,
        bucket_sizes(bucket_boundaries, longest, batch_size, batch_tokens),
        pad_to_bucket_boundary=pad_to_bucket_boundary,
        drop_remainder=drop_remainder,
    )


def auto_bucket_boundaries(lengths, num_buckets=8, method=DEFAULT_BUCKET_METHOD):
    """Boundaries splitting `lengths` into at most `num_buckets` buckets.

    Args:
        lengths: sequence of int lengths.
        num_buckets: int. Defaults to 8.
        method: `"equal_count"` (buckets of about equal numbers of pairs: the
            quantiles of `lengths`) or `"min_padding"` (the boundaries that
            pad the fewest tokens when each batch is padded to its bucket's
            longest length; `min_padding_boundaries`). Defaults to
            `"equal_count"`.

    Returns:
        A sorted list of distinct int boundaries (bucket i holds lengths
        below boundary i, the last bucket the rest).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    check_choice("method", method, BUCKET_METHODS)
    if lengths.size == 0:
        return []
    if method == "min_padding":
        return min_padding_boundaries(np.bincount(lengths), num_buckets)
    quantiles = np.quantile(lengths, np.arange(1, num_buckets) / num_buckets)
    return sorted({int(q) + 1 for q in quantiles if int(q) + 1 <= lengths.max()})


def min_padding_boundaries(histogram, num_buckets):
    """The boundaries of at most `num_buckets` buckets that pad the fewest tokens.

    A bucket holds a range of lengths and its batches are padded to the
    longest of them (as with `pad_to_bucket_boundary`), so a bucket costs
    (its pairs) x (its longest length) tokens; the sum over buckets is
    minimised exactly by dynamic programming over the lengths that occur
    (O(num_buckets x distinct lengths^2), vectorised over one axis). The
    buckets do not hold equal numbers of pairs: a corpus' long tail, which
    equal-count buckets leave in one bucket padded to the longest pair,
    gets buckets of its own.

    Args:
        histogram: sequence of int. `histogram[n]` pairs have length n.
        num_buckets: int >= 1.

    Returns:
        A sorted list of int boundaries, as `auto_bucket_boundaries`.

    Example:

    >>> lengths = [10] * 90 + [40] * 9 + [60]
    >>> min_padding_boundaries(np.bincount(lengths), 2)  # 90 x 10 + 10 x 60 tokens
    [11]
    >>> min_padding_boundaries(np.bincount(lengths), 3)  # 90 x 10 + 9 x 40 + 60
    [11, 41]
    """
    check_positive_int("num_buckets", num_buckets)
    counts = np.asarray(histogram, dtype=np.int64)
    lengths = np.flatnonzero(counts)  # the lengths that occur, ascending
    if lengths.size == 0:
        return []
    pairs_up_to = np.concatenate([[0], np.cumsum(counts[lengths])])  # pairs_up_to[i]: pairs in lengths[:i]
    n, buckets = lengths.size, min(num_buckets, lengths.size)
    # cost[j]: fewest padded tokens covering lengths[:j] with the buckets so far; start[k][j]: where the
    # last of k buckets covering lengths[:j] starts.
    cost = np.full(n + 1, np.inf)
    cost[0] = 0.0
    start = np.zeros((buckets + 1, n + 1), dtype=np.int64)
    for k in range(1, buckets + 1):
        new = np.full(n + 1, np.inf)
        for j in range(1, n + 1):  # a bucket over lengths[i:j], padded to lengths[j - 1]
            options = cost[:j] + (pairs_up_to[j] - pairs_up_to[:j]) * lengths[j - 1]
            start[k, j] = int(np.argmin(options))
            new[j] = options[start[k, j]]
        cost = new
    ends, j = [], n  # walk back from the last bucket: each one's end, then where it starts
    for k in range(buckets, 0, -1):  # only the first bucket starts at 0 (each later one holds a length)
        ends.append(j)
        j = start[k, j]
    return sorted(int(lengths[end - 1]) + 1 for end in ends[1:])


def padding_fraction(dataset, num_batches=None):
    """Fraction of zeros (padding) among all ids of a batched dataset.

    Args:
        dataset: the `((source_ids, target_in), target_out)` batches.
        num_batches: int. Only look at the first batches. Defaults to all.

    Returns:
        A float in [0, 1].
    """
    zeros = total = 0
    batches = dataset if num_batches is None else dataset.take(num_batches)
    for (x, y_in), y_out in batches.as_numpy_iterator():
        for ids in (x, y_in, y_out):
            zeros += int(np.sum(ids == 0))
            total += ids.size
    return zeros / total if total else 0.0


def _check_boundaries(boundaries):
    values = [] if boundaries is None else list(boundaries)
    if not all(isinstance(b, (int, np.integer)) and b > 0 for b in values) or values != sorted(
        set(values)
    ):
        raise ValueError(
            "`bucket_boundaries` must be None, 'auto' or increasing positive ints. "
            f"Received: bucket_boundaries={boundaries!r}"
        )
    return [int(b) for b in values]
