"""Argument checks whose errors name the argument and the value received."""


def check_positive_int(name, value):
    """Return `value` if it is an int >= 1, else raise ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1. Received: {name}={value!r}")  # as in options.RANGES
    return value


def check_rate(name, value):
    """Return `value` as a float if 0 <= value < 1, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


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


def check_attention_shapes(query_shape, value_shape, key_shape):
    """Shape checks shared by the RNN attention layers (Bahdanau, Luong).

    `query` is `(B, d_q)` or `(B, T_q, d_q)`; `value` and `key` are
    `(B, T_v, d)` with known feature sizes and, when known, equal lengths.
    """
    check_rank("query", query_shape, (2, 3))
    check_rank("value", value_shape, (3,))
    check_rank("key", key_shape, (3,))
    for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
        if shape[-1] is None:
            raise ValueError(
                f"`{name}` must have a known feature size. Received: {name}.shape={tuple(shape)}"
            )
    if None not in (key_shape[1], value_shape[1]) and key_shape[1] != value_shape[1]:
        raise ValueError(
            "`key` and `value` must have the same length T_v. Received: "
            f"key.shape={tuple(key_shape)}, value.shape={tuple(value_shape)}"
        )
