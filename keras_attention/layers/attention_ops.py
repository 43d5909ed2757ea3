"""Attention maths shared by the layers: masks, masked softmax, scaled dot-product.

Everything here uses `keras.ops` and compiles with XLA; on the TensorFlow
backend the attention dropout is `dropout.fast_dropout` (cheaper random
numbers). Masks are boolean tensors where `True` means "may attend".
"""

import functools
import math

import keras
from keras import ops

from keras_attention.layers.dropout import fast_dropout
from keras_attention.layers.matmul import matmul


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
    """Lower-triangular mask of shape (query_length, key_length).

    Query position `i` sits at absolute position `offset + i` and may attend to
    key positions `j <= offset + i`. `offset` is the cache index during
    incremental decoding (0 for a full pass); it may be a tensor.
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


# Causal attention over at least two blocks of queries is computed block by
# block, each block against the keys it can see: `CAUSAL_BLOCKS` blocks of at
# least `MIN_CAUSAL_QUERY_BLOCK` queries (benchmarks/RESULTS.md at 8068402, attention layer).
CAUSAL_BLOCKS = 4
MIN_CAUSAL_QUERY_BLOCK = 64


def causal_query_block(query_length):
    """The query block of causal attention over `query_length` queries, or None for one block."""
    if query_length < 2 * MIN_CAUSAL_QUERY_BLOCK:
        return None
    return max(MIN_CAUSAL_QUERY_BLOCK, -(-query_length // CAUSAL_BLOCKS))


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    dropout=0.0,
    training=False,
    seed=None,
    scale=None,
    cache_layout=False,
    causal=False,
):
    """Scaled dot-product attention, softmax(Q K^T / sqrt(d_k)) V.

    The function form of Vaswani et al. (2017), section 3.2.1, "Attention Is All
    You Need" (https://arxiv.org/abs/1706.03762). Dividing the logits by
    sqrt(d_k) keeps their variance near one when the entries of Q and K are,
    so the softmax does not saturate as d_k grows.

    With `causal=True` and at least `2 * MIN_CAUSAL_QUERY_BLOCK` (128)
    queries, the queries are taken in `CAUSAL_BLOCKS` (4) blocks of at least
    64, and each block is multiplied only with the keys up to its last
    position: the key blocks above the diagonal, whose weights are exactly
    zero, are never computed. With 4 blocks that skips 3/8 of the two
    products and of the softmax, and no `(T_q, T_k)` tensor is formed at
    once. Within a block, the keys before the block's first query are seen
    by all of its queries and need no causal mask; only the square tile on
    the diagonal is masked (one triangle shared by the blocks), so no masked
    copy of the past scores is made. The result is the one of the full
    computation (a row whose visible keys are all masked still gets uniform
    weights over all `T_k` keys).

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
        cache_layout: bool. With rank 4 inputs, `key` is `(B, N, d_k, T_k)`
            and `value` `(B, N, T_k, d_v)` instead of `(B, T_k, N, d)`: the
            layout of `MultiHeadAttention`'s decoding cache, in which both
            products read their operand as it is stored (in the other layout
            XLA copies the whole cache into this one at every step).
            Defaults to False.
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
    key_depth = key.shape[2] if cache_layout else key.shape[-1]
    if query.shape[-1] is not None and key_depth is not None:
        if query.shape[-1] != key_depth:
            raise ValueError(
                "`query` and `key` must have the same depth d_k (their last axis; a key's axis 2 with "
                "`cache_layout=True`). "
                f"Received: query.shape={tuple(query.shape)}, "
                f"key.shape={tuple(key.shape)}"
            )
    if cache_layout and rank != 4:
        raise ValueError(
            "`cache_layout=True` needs a rank 4 query (B, T_q, N, d_k), key (B, N, d_k, T_k) and value "
            f"(B, N, T_k, d_v). Received: query.shape={tuple(query.shape)}"
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout}")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    if mask is not None:
        mask = ops.cast(mask, "bool")
        if rank == 4 and len(mask.shape) == 3:
            mask = ops.expand_dims(mask, 1)  # (B, 1, T_q, T_k): shared by heads
    attend = functools.partial(
        _attend, cache_layout=cache_layout, dropout=dropout, training=training, seed=seed
    )
    if causal and _can_skip_blocks(query, key, mask, cache_layout):
        return _block_causal_attention(attend, query, key, value, mask)
    if causal:
        key_length = ops.shape(key)[3 if cache_layout else 1]
        mask = combine_masks(mask, causal_mask(ops.shape(query)[1], key_length))
    output, weights, _ = attend(query, [(key, value, mask)])
    return output, weights


def _can_skip_blocks(query, key, mask, cache_layout):
    """Whether causal attention can run block by block: static lengths, long enough, slicable mask."""
    if cache_layout or query.shape[1] is None or key.shape[1] is None:
        return False
    if mask is not None and (len(mask.shape) < 2 or None in mask.shape[-2:]):
        return False  # a mask axis of unknown size may be a broadcast 1
    return causal_query_block(query.shape[1]) is not None


def _block_causal_attention(attend, query, key, value, mask):
    """Causal attention by blocks of queries, each against the keys up to its last position.

    A block of queries `[start, stop)` sees two tiles of keys: the past
    `[0, start)`, visible to all of its queries (no causal mask to apply),
    and the diagonal `[start, stop)`, under the lower-triangular mask that
    every full block shares. Both tiles go through one softmax.
    """
    query_length, key_length = query.shape[1], key.shape[1]
    block = causal_query_block(query_length)
    triangle = causal_mask(block, block)  # (T_block, T_block), one tensor for every full block
    outputs, weights = [], []
    for start in range(0, query_length, block):
        stop = min(start + block, query_length)
        past = min(start, key_length)  # keys [0, past) are visible to every query of the block
        end = min(stop, key_length)  # keys [past, end) to some of them
        rows = slice(start, stop)
        tiles = []
        if past > 0:
            tiles.append((key[:, :past], value[:, :past], _mask_tile(mask, rows, slice(0, past))))
        if end > past:
            diagonal = triangle[: stop - start, : end - past]  # (T_block, end - past)
            user = _mask_tile(mask, rows, slice(past, end))
            tile_mask = diagonal if user is None else ops.logical_and(diagonal, user)
            tiles.append((key[:, past:end], value[:, past:end], tile_mask))
        tiles = tiles or [(key, value, None)]  # no keys at all: one empty tile
        output, block_weights, shift = attend(query[:, start:stop], tiles)
        block_weights = ops.pad(block_weights, [(0, 0)] * (len(query.shape) - 1) + [(0, key_length - end)])
        if mask is not None and end < key_length:
            # A row whose visible keys are all masked has uniform weights over
            # all T_k keys in the full computation, the skipped ones included:
            # there, mean(all values) = output * end / T_k + sum(skipped) / T_k.
            hidden = ops.less_equal(shift, large_negative("float32"))  # (B, [N,] T_block, 1)
            skipped = ops.sum(value[:, end:], axis=1, keepdims=True)  # (B, 1, [N,] d_v)
            uniform = output * (end / key_length) + skipped / key_length
            if len(query.shape) == 4:
                hidden_rows = ops.transpose(hidden, (0, 2, 1, 3))  # (B, T_block, N, 1)
            else:
                hidden_rows = hidden
            output = ops.where(hidden_rows, uniform, output)
            block_weights = ops.where(hidden, ops.cast(1.0 / key_length, block_weights.dtype), block_weights)
        outputs.append(output)
        weights.append(block_weights)
    return ops.concatenate(outputs, axis=1), ops.concatenate(weights, axis=-2)


def _mask_tile(mask, rows, columns):
    """The part of a `(..., T_q|1, T_k|1)` mask over query `rows` and key `columns` (axes of size 1 broadcast)."""
    if mask is None:
        return None
    rows = rows if mask.shape[-2] != 1 else slice(None)
    columns = columns if mask.shape[-1] != 1 else slice(None)
    return mask[..., rows, columns]


def _attend(query, tiles, cache_layout, dropout, training, seed):
    """Attention of `query` over key tiles with ready masks: `(output, weights, shift)`.

    `tiles` is a list of `(key, value, mask)` over consecutive ranges of keys
    (one tile: plain attention); their scores share one softmax. `weights`
    covers the tiles' keys in order; `shift` is each row's largest (masked)
    score, `(B, [N,] T_q, 1)` float32.
    """
    rank = len(query.shape)
    k_axes, v_axes = ("bndk", "bnkd") if cache_layout else ("bknd", "bknd")  # rank 4
    # The softmax, its normalisation applied where the tensor is smaller: to
    # the output, (exp(s - max) V) / sum(exp(s - max)), a division over
    # (T_q, d_v), when there are more keys than d_v (the normalised weights
    # are then only formed when something uses them: dropout, or a caller
    # that returns them; XLA drops them otherwise), else to the weights.
    # Computed in float32 whatever the input dtype; a row whose keys are all
    # masked gets uniform weights, as in `masked_softmax`.
    dtype = query.dtype
    scores = []
    for key, _, mask in tiles:
        if rank == 3:
            tile = ops.einsum("bqd,bkd->bqk", query, key)  # (B, T_q, T_k)
        else:
            tile = ops.einsum(f"bqnd,{k_axes}->bnqk", query, key)  # (B, N, T_q, T_k)
        tile = ops.cast(tile, "float32")
        if mask is not None:
            tile = ops.where(mask, tile, large_negative("float32"))  # a bool mask, cast by the caller
        scores.append(tile)
    # `initial`: Keras' eager `max` refuses an empty tensor (an empty batch).
    shifts = [ops.max(tile, axis=-1, keepdims=True, initial=large_negative("float32")) for tile in scores]
    shift = functools.reduce(ops.maximum, shifts)  # (B, [N,] T_q, 1)
    unnormalised = [ops.exp(tile - ops.stop_gradient(shift)) for tile in scores]
    total = functools.reduce(ops.add, [ops.sum(u, axis=-1, keepdims=True) for u in unnormalised])  # >= 1
    weights = [ops.cast(u / total, dtype) for u in unnormalised]
    equation = "bqk,bkd->bqd" if rank == 3 else f"bnqk,{v_axes}->bqnd"
    if training and dropout > 0.0:
        if keras.backend.backend() == "tensorflow":
            dropped = [fast_dropout(w, dropout, seed) for w in weights]
        else:
            dropped = [keras.random.dropout(w, dropout, seed=seed) for w in weights]
        output = _sum_products(equation, dropped, tiles)  # (B, T_q, [N,] d_v)
    elif _normalise_weights_first(scores, tiles[0][1]):
        output = _sum_products(equation, weights, tiles)  # (B, T_q, [N,] d_v)
    else:
        output = _sum_products(equation, [ops.cast(u, dtype) for u in unnormalised], tiles)
        if rank == 4:
            total = ops.transpose(total, (0, 2, 1, 3))  # (B, T_q, N, 1)
        output = output / ops.cast(total, dtype)
    weights = weights[0] if len(weights) == 1 else ops.concatenate(weights, axis=-1)
    return output, weights, shift


def _normalise_weights_first(scores, value):
    """Whether to divide the `(T_q, T_k)` weights rather than the `(T_q, d_v)` output.

    The smaller of the two: the weights for a single tile of at most `d_v`
    keys (both statically known), the output otherwise. At equal sizes (64
    keys, `d_v` 64) the weights: measured slightly faster there under XLA
    (benchmarks/RESULTS.md at 8068402, attention layer).
    """
    if len(scores) != 1:
        return False
    key_length, value_depth = scores[0].shape[-1], value.shape[-1]
    return key_length is not None and value_depth is not None and key_length <= value_depth


def _sum_products(equation, weights, tiles):
    """The sum over tiles of `einsum(equation, weights, value)`."""
    products = [ops.einsum(equation, w, value) for w, (_, value, _) in zip(weights, tiles)]
    return functools.reduce(ops.add, products)


def dense_project(x, kernel, bias=None):
    """`x @ kernel (+ bias)` over the last axis of `x` (any rank), as one 2-D matrix product.

    `(..., d) x (d, u) -> (..., u)`. Flattening the leading axes first keeps
    the product a plain GEMM: a rank-3 `ops.matmul` becomes a `tensordot`
    whose dynamic transposes XLA cannot compile inside a loop's gradient.
    The product is `matmul.matmul`, whose kernel gradient runs faster under
    XLA. The bias (`(u,)`, or any shape of `u` elements such as `(N, H)`) is
    added to the 2-D product, so that its gradient is a sum over the rows of
    a matrix: summed over the leading axes of a rank-3 or rank-4 gradient
    instead, XLA's CPU backend splits the sum into a slower windowed
    reduction (benchmarks/RESULTS.md at 8068402, training speed).
    """
    d, u = kernel.shape
    leading = ops.shape(x)[:-1]
    y = matmul(ops.reshape(x, (-1, d)), kernel)  # (prod(leading), u)
    if bias is not None:
        y = y + ops.reshape(bias, (u,))
    return ops.reshape(y, tuple(leading) + (u,))  # (..., u)
