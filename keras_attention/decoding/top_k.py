"""An exact top k over a large last axis, from block maxima first."""

from keras import ops

from keras_attention.base.validation import check_positive_int


def blockwise_top_k(values, k, block_size=32):
    """The `k` largest entries of the last axis, as `ops.top_k(values, k)`, found block by block.

    The last axis is cut into blocks of `block_size` entries. An entry among
    the k largest lies in one of the k blocks with the largest maxima (were
    its block not among them, k other blocks would each hold an entry that
    ranks before it), so the search reads every entry once for the block
    maxima, then ranks only the `k * block_size` entries of those k blocks
    (beam search's per-hypothesis step ranks 4 of thousands of words). The
    blocks are searched in index order, so equal entries rank as in
    `ops.top_k`: lower index first. Falls back to `ops.top_k` when the axis
    is unknown or not larger than `2 * k * block_size`.

    Args:
        values: float tensor `(..., V)` without NaN.
        k: int >= 1, at most `V`.
        block_size: int >= 1. Entries a block. Defaults to 32.

    Returns:
        `(top_values (..., k), indices (..., k) int32)`, largest first.

    Example:

    >>> logits = ops.convert_to_tensor([[0.0] * 200 + [3.0, 1.0, 2.0]])
    >>> top, index = blockwise_top_k(logits, 2, block_size=8)
    >>> ops.convert_to_numpy(index).tolist()
    [[200, 202]]
    """
    k = check_positive_int("k", k)
    block_size = check_positive_int("block_size", block_size)
    size = values.shape[-1]
    if size is not None and k > size:
        raise ValueError(f"`k` must be at most the last axis' size {size}. Received: k={k}")
    if size is None or size <= 2 * k * block_size:
        top, index = ops.top_k(values, k, sorted=True)
        return top, ops.cast(index, "int32")
    leading = ops.shape(values)[:-1]
    pad = -size % block_size
    flat = ops.reshape(values, (-1, size))  # (R, V)
    if pad:
        flat = ops.pad(flat, [(0, 0), (0, pad)], constant_values=float("-inf"))  # never ranks before a real entry
    # The block count is static (a -1 cannot be inferred for an empty batch).
    blocks = ops.reshape(flat, (-1, (size + pad) // block_size, block_size))  # (R, ceil(V / block), block)
    maxima = ops.max(blocks, axis=-1, initial=float("-inf"))  # (R, blocks); `initial`: an empty batch is no error
    _, best_blocks = ops.top_k(maxima, k, sorted=True)  # (R, k)
    best_blocks = ops.sort(ops.cast(best_blocks, "int32"), axis=-1)  # in index order, for the ties
    candidates = ops.take_along_axis(blocks, ops.expand_dims(best_blocks, -1), axis=1)  # (R, k, block)
    top, position = ops.top_k(ops.reshape(candidates, (-1, k * block_size)), k, sorted=True)  # (R, k)
    position = ops.cast(position, "int32")
    index = ops.take_along_axis(best_blocks, position // block_size, axis=1) * block_size + position % block_size
    return ops.reshape(top, (*leading, k)), ops.reshape(index, (*leading, k))  # (..., k)
