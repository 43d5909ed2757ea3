"""The one argument check: each refusal names the argument, what it must be, and what it got."""

import math

import pytest

from keras_attention.base import options
from keras_attention.base.validation import (
    Range,
    check_choice,
    check_non_negative_float,
    check_positive_int,
    check_range,
    check_rank,
    check_rate,
)


@pytest.mark.parametrize("value", [0, -2, 1.0, True, "3", None])
def test_positive_int_refuses(value):
    with pytest.raises(ValueError, match=rf"^`units` must be an integer >= 1\. Received: units={value!r}$"):
        check_positive_int("units", value)


def test_accepted_values_come_back():
    assert check_positive_int("units", 7) == 7 and check_positive_int("units", 10**400) == 10**400
    assert check_rate("dropout", 0) == 0.0 and isinstance(check_rate("dropout", 0), float)
    assert check_non_negative_float("length_penalty", 2) == 2.0
    assert check_choice("score", "dot", ("dot", "general")) == "dot"


def test_numpy_scalars_are_numbers_and_come_back_as_python_ones():
    import numpy as np

    units, dropout = check_positive_int("units", np.int64(8)), check_rate("dropout", np.float32(0.25))
    assert (units, dropout) == (8, 0.25) and type(units) is int and type(dropout) is float
    for value in (np.bool_(True), np.float64(2.0), np.float64(math.nan)):
        with pytest.raises(ValueError, match=r"^`units` must be an integer >= 1\. Received: units="):
            check_positive_int("units", value)
    with pytest.raises(ValueError, match=r"Received: dropout="):
        check_rate("dropout", np.float64(math.nan))


@pytest.mark.parametrize("value", [1, 1.0, -0.1, math.nan, False])
def test_rate_is_below_one(value):
    with pytest.raises(ValueError, match=r"^`dropout` must be a number in \[0, 1\)\. Received: dropout="):
        check_rate("dropout", value)


@pytest.mark.parametrize("value", [-1e-9, math.inf, "0.6"])
def test_non_negative_refuses_negative_infinite_and_text(value):
    with pytest.raises(ValueError, match=r"^`length_penalty` must be a number >= 0\. Received: length_penalty="):
        check_non_negative_float("length_penalty", value)


def test_ranges_describe_their_open_and_closed_ends():
    assert Range(float, 0, 1, low_open=True).describe() == "a number in (0, 1]"
    assert Range(int, 0).describe() == "an integer >= 0" and Range(float, 0, low_open=True).describe() == "a number > 0"
    assert Range(float, 0, 1, low_open=True).contains(1) and not Range(float, 0, 1, low_open=True).contains(0)
    with pytest.raises(ValueError, match=r"^`top_p` must be a number in \(0, 1\]\. Received: top_p=0$"):
        check_range("top_p", 0, Range(float, 0, 1, low_open=True))


def test_the_option_table_refuses_in_the_same_words():
    with pytest.raises(ValueError, match=r"^`epochs` must be an integer >= 1\. Received: epochs=0$"):
        options.check_option("epochs", 0)
    assert options.check_option("epochs", None) is None  # unset: the default applies


def test_choice_and_rank_name_what_they_got():
    with pytest.raises(ValueError, match=r"^`score` must be one of 'dot', 'general'\. Received: score='cat'$"):
        check_choice("score", "cat", ("dot", "general"))
    with pytest.raises(ValueError, match=r"^`query` must have rank 2 or 3\. Received: query\.shape=\(4,\)$"):
        check_rank("query", (4,), (2, 3))
    check_rank("query", (2, None, 8), (2, 3))


def test_truncation_warning_carries_its_figures_through_pickle_and_copy():
    import copy
    import pickle

    from keras_attention.base.validation import TruncationWarning

    warning = TruncationWarning(3, 10, 24)
    assert isinstance(warning, UserWarning)
    assert str(warning) == "3 of 10 sentences are longer than max_source_length=24 tokens and were truncated."
    for again in (pickle.loads(pickle.dumps(warning)), copy.copy(warning)):
        assert (again.truncated, again.total, again.max_source_length, str(again)) == (3, 10, 24, str(warning))
