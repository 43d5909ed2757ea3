"""Attention maths shared by the layers: masks, masked softmax, scaled dot-product.

Everything here is `keras.ops`, so it runs on every Keras backend and
device. Masks are boolean tensors where `True` means "may attend".
"""

import math

import keras
from keras import ops


def large_negative(dtype):
    """The score given to masked positions before the softmax.

    float16 cannot hold -1e9, so it gets -3e4 (as Keras' own `Softmax` does);
    exp(-3e4 - max) underflows to exactly zero in float16 and float32 alike.
    """
    if keras.backend.standardize_dtype(dtype) == "float16":
        return -3e4
    return -1e9


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax over `axis` that gives zero weight where `mask` is False.

    The softmax is computed in float32 whatever the input dtype, then cast back,
    so mixed-precision scores neither overflow nor lose their small weights.
    A row whose positions are all masked gets uniform weights (as in
    `keras.layers.MultiHeadAttention`), never NaN.

    Args:
        scores: float tensor of attention logits.
        mask: optional boolean tensor broadcastable to `scores`.
        axis: the axis to normalise over. Defaults to -1.
    """
    dtype = scores.dtype
    scores = ops.cast(scores, "float32")
    if mask is not None:
        scores = ops.where(ops.cast(mask, "bool"), scores, large_negative("float32"))
    return ops.cast(ops.softmax(scores, axis=axis), dtype)


def causal_mask(query_length, key_length, offset=0):
    """The causal mask: query `i` may attend to keys `j <= offset + i` (Vaswani et al., 2017, section 3.2.3).

    Query position `i` sits at absolute position `offset + i`; `offset` is
    the cache index during incremental decoding (0 for a full pass).

    Args:
        query_length: int. Number of query positions.
        key_length: int. Number of key positions.
        offset: int or int scalar tensor. Absolute position of query 0.
            Defaults to 0.

    Returns:
        A bool tensor `(query_length, key_length)`, True where attending is
        allowed: lower-triangular when `offset` is 0. Pass it as `mask` to
        `scaled_dot_product_attention` (it broadcasts over batch and heads).

    Example:

    >>> ops.convert_to_numpy(causal_mask(3, 3)).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    q = ops.expand_dims(ops.arange(query_length) + offset, -1)  # (T_q, 1)
    k = ops.expand_dims(ops.arange(key_length), 0)  # (1, T_k)
    return ops.greater_equal(q, k)


def combine_masks(*masks):
    """Logical AND of the masks that are not None (broadcasting), or None."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        result = mask if result is None else ops.logical_and(result, mask)
    return result


def padding_to_attention_mask(query_mask=None, key_mask=None):
    """Turn (B, T_q) and (B, T_k) padding masks into one (B, T_q|1, T_k) mask."""
    masks = []
    if query_mask is not None:
        masks.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))  # (B, T_q, 1)
    if key_mask is not None:
        masks.append(ops.expand_dims(ops.cast(key_mask, "bool"), -2))  # (B, 1, T_k)
    return combine_masks(*masks)


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    dropout=0.0,
    training=False,
    seed=None,
    scale=None,
    causal=False,
):
    """Scaled dot-product attention, softmax(Q K^T / sqrt(d_k)) V.

    The function form of Vaswani et al. (2017), section 3.2.1, "Attention Is All
    You Need" (https://arxiv.org/abs/1706.03762). Dividing the logits by
    sqrt(d_k) keeps their variance near one when the entries of Q and K are,
    so the softmax does not saturate as d_k grows. The softmax runs in
    float32 whatever the inputs' dtype; a query whose keys are all masked
    gets uniform weights (as in `keras.layers.MultiHeadAttention`).

    This form returns the weights, which the fused
    `keras.ops.dot_product_attention` does not; `MultiHeadAttention` uses the
    fused kernel whenever the weights are not asked for.

    Args:
        query: float tensor `(B, T_q, d_k)` or, with heads, `(B, T_q, N, d_k)`.
        key: float tensor `(B, T_k, d_k)` or `(B, T_k, N, d_k)`.
        value: float tensor `(B, T_k, d_v)` or `(B, T_k, N, d_v)`.
        mask: optional boolean tensor, `True` where a query may attend to a key,
            broadcastable to the weights' shape `(B, T_q, T_k)` (rank 3 inputs)
            or `(B, N, T_q, T_k)` (rank 4 inputs). A `(B, T_q, T_k)` mask is
            shared by all heads.
        dropout: float in [0, 1). Dropout on the attention weights during
            training. Defaults to 0.
        training: bool. Whether dropout is applied. Defaults to False.
        seed: int or `keras.random.SeedGenerator` for the dropout.
        scale: optional float. The factor applied to the logits. Defaults to
            `1 / sqrt(d_k)`.
        causal: bool. Query `i` may only attend to keys `j <= i` (on top of
            `mask`), as `causal_mask(T_q, T_k)`. Defaults to False.

    Returns:
        `(output, weights)`: `output` has the query's layout with `d_v` features;
        `weights` is `(B, T_q, T_k)` or `(B, N, T_q, T_k)` and sums to one over
        `T_k` (before dropout).

    Example:

    >>> q = keras.random.normal((2, 5, 8))
    >>> k = v = keras.random.normal((2, 7, 8))
    >>> out, w = scaled_dot_product_attention(q, k, v)
    >>> tuple(out.shape), tuple(w.shape)
    ((2, 5, 8), (2, 5, 7))
    """
    rank = len(query.shape)
    if rank not in (3, 4) or len(key.shape) != rank or len(value.shape) != rank:
        raise ValueError(
            "`query`, `key` and `value` must all have rank 3 (B, T, d) or rank 4 "
            f"(B, T, N, d). Received: query.shape={tuple(query.shape)}, "
            f"key.shape={tuple(key.shape)}, value.shape={tuple(value.shape)}"
        )
    if query.shape[-1] is not None and key.shape[-1] is not None and query.shape[-1] != key.shape[-1]:
        raise ValueError(
            "`query` and `key` must have the same depth d_k (their last axis). "
            f"Received: query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}"
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout}")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if mask is not None:
        mask = ops.cast(mask, "bool")
        if rank == 4 and len(mask.shape) == 3:
            mask = ops.expand_dims(mask, 1)  # (B, 1, T_q, T_k): shared by heads
    if causal:
        mask = combine_masks(mask, causal_mask(ops.shape(query)[1], ops.shape(key)[1]))
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    if rank == 3:
        scores = ops.einsum("bqd,bkd->bqk", query, key)  # (B, T_q, T_k)
    else:
        scores = ops.einsum("bqnd,bknd->bnqk", query, key)  # (B, N, T_q, T_k)
    weights = masked_softmax(scores, mask)
    dropped = weights
    if training and dropout > 0.0:
        dropped = keras.random.dropout(weights, dropout, seed=seed)
    equation = "bqk,bkd->bqd" if rank == 3 else "bnqk,bknd->bqnd"
    return ops.einsum(equation, dropped, value), weights
