"""Checks of tensors given to the layers: shapes, masks, token ids, keyword-only arguments.

The numeric and choice checks are `keras_attention.base.validation`'s.
"""

import keras
import numpy as np
from keras import ops
from keras.src.backend.common.symbolic_scope import in_symbolic_scope

from keras_attention.base.validation import check_rank


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


def check_same_batch(**shapes):
    """Raise ValueError unless the tensors' batch sizes (`name=shape`, None for an absent tensor) agree
    where known."""
    known = {name: tuple(shape) for name, shape in shapes.items() if shape is not None and shape[0] is not None}
    if len({shape[0] for shape in known.values()}) > 1:
        received = ", ".join(f"{name}.shape={shape}" for name, shape in known.items())
        names = [f"`{name}`" for name in known]
        raise ValueError(f"{', '.join(names[:-1])} and {names[-1]} must have the same batch size. Received: {received}")


def refuse_positional(layer, args, names):
    """Raise TypeError for arguments passed by position where `names` must be keywords."""
    if args:
        shown = ", ".join(f"{name}=..." for name in names)
        raise TypeError(
            f"{layer} takes {', '.join(names)} as keywords ({layer}({shown})), so that they cannot be "
            f"swapped with keras-hub's order. Received positional arguments: {args!r}"
        )


def require_keywords(layer, **values):
    """Raise TypeError, as Python does for a missing argument, for each keyword left None."""
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise TypeError(f"{layer}() missing required keyword argument(s): {', '.join(map(repr, missing))}")


def check_mask(name, mask, expected, broadcast=False):
    """Raise ValueError unless `mask` has the rank of `expected` and its sizes.

    `expected` is a shape whose None entries match anything; a batch size of
    1 broadcasts. With `broadcast` (attention masks, as Keras takes them) a
    size of 1 matches any axis, and a head axis may follow the batch axis.
    Only sizes known when the call is traced are compared.
    """
    if mask is None:
        return
    shape = tuple(mask.shape)
    if broadcast and len(shape) == len(expected) + 1:
        expected = (expected[0], None, *expected[1:])  # (B, N, T_q, T_k): one mask a head
    fits = len(shape) == len(expected) and all(
        got is None or want is None or got == want or (got == 1 and (broadcast or axis == 0))
        for axis, (got, want) in enumerate(zip(shape, expected))
    )
    if not fits:
        wanted = "(" + ", ".join("?" if s is None else str(s) for s in expected) + ")"
        raise ValueError(f"`{name}` must have shape {wanted}. Received: {name}.shape={shape}")


def static_int(x):
    """`x` as a Python int when it is a scalar whose value is known now; None inside a traced program."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if getattr(x, "shape", None) not in ((), None):
        return None  # not a scalar: the caller's own checks apply
    try:
        value = ops.convert_to_numpy(x)
    except (NotImplementedError, TypeError, ValueError):  # a graph tensor, a JAX tracer, a KerasTensor
        return None
    return int(value) if np.issubdtype(np.asarray(value).dtype, np.integer) else None


def check_token_ids(name, ids):
    """Raise ValueError unless `ids` holds integers (token ids, not floats).

    Symbolic calls pass: Keras builds a model from its input shapes with
    float placeholders. Real and traced tensors are checked.
    """
    dtype = keras.backend.standardize_dtype(ids.dtype) if hasattr(ids, "dtype") else type(ids).__name__
    if "int" not in dtype and not isinstance(ids, keras.KerasTensor) and not in_symbolic_scope():
        raise ValueError(
            f"`{name}` must hold integer token ids. Received: {name} with dtype {dtype}"
        )
