"""Length buckets: the min-padding boundaries are the best of every possible set (by exhaustive search)."""

import itertools

import numpy as np
import pytest

from keras_attention.data import auto_bucket_boundaries, min_padding_boundaries


def padded_tokens(lengths, boundaries):
    """Tokens when each bucket is padded to its longest pair, worked out pair by pair."""
    lengths = np.asarray(lengths)
    edges = [0, *boundaries, lengths.max() + 1]
    total = 0
    for low, high in zip(edges[:-1], edges[1:]):
        inside = lengths[(lengths >= low) & (lengths < high)]
        total += inside.size * int(inside.max(initial=0))
    return total


def best_by_search(lengths, num_buckets):
    """The fewest padded tokens over every set of at most `num_buckets - 1` boundaries."""
    candidates = range(int(np.min(lengths)) + 1, int(np.max(lengths)) + 1)
    return min(padded_tokens(lengths, cut) for k in range(num_buckets)
               for cut in itertools.combinations(candidates, k))


@pytest.mark.parametrize("seed", range(6))
def test_min_padding_boundaries_pad_no_more_than_the_best_of_every_set(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 14, size=int(rng.integers(5, 60)))
    num_buckets = int(rng.integers(1, 5))
    boundaries = min_padding_boundaries(np.bincount(lengths), num_buckets)
    assert boundaries == sorted(set(boundaries)) and len(boundaries) <= num_buckets - 1
    assert padded_tokens(lengths, boundaries) == best_by_search(lengths, num_buckets)


def test_a_long_tail_gets_buckets_of_its_own():
    """Most pairs short, a few long: equal-count buckets pad the tail bucket to the longest pair."""
    lengths = np.concatenate([np.repeat(np.arange(10, 20), 100), np.repeat(np.arange(20, 60), 3)])
    equal = auto_bucket_boundaries(lengths, 4)
    fewest = auto_bucket_boundaries(lengths, 4, method="min_padding")
    assert fewest == min_padding_boundaries(np.bincount(lengths), 4)
    assert max(fewest) > 20 > max(equal)  # a boundary inside the tail
    assert padded_tokens(lengths, fewest) < 0.9 * padded_tokens(lengths, equal)  # 22,380 against 26,480


def test_edge_cases_and_a_bad_method():
    assert min_padding_boundaries([], 8) == [] and min_padding_boundaries([0, 0, 5], 8) == []  # one length
    assert min_padding_boundaries(np.bincount([3, 4, 9]), 8) == [4, 5]  # a bucket a length
    assert auto_bucket_boundaries([], method="min_padding") == []
    with pytest.raises(ValueError, match="method='fewest'"):
        auto_bucket_boundaries([3, 4], method="fewest")
