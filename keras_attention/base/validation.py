"""Argument checks whose errors name the argument and the value received.

One message for every numeric check, built from a `Range`:

    `epochs` must be an integer >= 1. Received: epochs=0

The option table (`base.options.RANGES`), the layers, the models and decoding
all check through `check_range`. Nothing here imports Keras.
"""

import dataclasses
import math
import numbers


@dataclasses.dataclass(frozen=True)
class Range:
    """Numbers from `low` to `high`; an open end excludes its bound."""

    kind: type
    low: float = None
    high: float = None
    low_open: bool = False
    high_open: bool = False

    def describe(self):
        noun = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{noun} in {left}{self.low}, {self.high}{right}"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {self.low}"
        return noun

    def contains(self, value):
        # numbers.Integral and Real hold NumPy's scalars too (np.int64(8) as Keras' layers take it), not bools.
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.kind is int and not isinstance(value, numbers.Integral):
            return False
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):  # an int may be too big for a float
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)


COUNT = Range(int, 1)
COUNT_OR_ZERO = Range(int, 0)
POSITIVE = Range(float, 0, low_open=True)
NON_NEGATIVE = Range(float, 0)
PROBABILITY_BELOW_ONE = Range(float, 0, 1, high_open=True)


def check_range(name, value, allowed):
    """Return `value` as a Python int or float if the `Range` `allowed` contains it, else raise ValueError
    naming both (a config then holds no NumPy scalar, which JSON cannot write)."""
    if not allowed.contains(value):
        raise ValueError(f"`{name}` must be {allowed.describe()}. Received: {name}={value!r}")
    return python_number(value)


def python_number(value):
    """`value` as a Python int or float if it is a number (NumPy's scalars too) but not a bool; else `value`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def check_positive_int(name, value):
    """Return `value` as a Python int if it is an integer >= 1 (NumPy's too, not a bool), else raise
    ValueError naming it."""
    return check_range(name, value, COUNT)


def check_rate(name, value):
    """Return `value` as a float if 0 <= value < 1 (a dropout or smoothing rate), else raise."""
    return float(check_range(name, value, PROBABILITY_BELOW_ONE))


def check_non_negative_float(name, value):
    """Return `value` as a float if it is a finite number >= 0, else raise."""
    return float(check_range(name, value, NON_NEGATIVE))


def check_choice(name, value, choices):
    """Return `value` if it is one of `choices`, else raise ValueError."""
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}. "
            f"Received: {name}={value!r}"
        )
    return value


def check_rank(name, tensor_shape, ranks):
    """Raise ValueError unless `len(tensor_shape)` is one of `ranks`."""
    if len(tensor_shape) not in ranks:
        wanted = " or ".join(str(r) for r in ranks)
        raise ValueError(
            f"`{name}` must have rank {wanted}. Received: {name}.shape={tuple(tensor_shape)}"
        )


class TruncationWarning(UserWarning):
    """Sentences longer than a translator's `max_source_length` were cut to it (warned once a call).

    Carries the figures, so that a caller can sum a run's warnings into one
    line (the command line does): `truncated` of `total` sentences, cut to
    `max_source_length` tokens.
    """

    def __init__(self, truncated, total, max_source_length):
        super().__init__(f"{truncated} of {total} sentences are longer than max_source_length={max_source_length} "
                         "tokens and were truncated.")
        self.truncated, self.total, self.max_source_length = truncated, total, max_source_length

    def __reduce__(self):  # pickled and copied with its figures (`args` holds only the message)
        return TruncationWarning, (self.truncated, self.total, self.max_source_length)
