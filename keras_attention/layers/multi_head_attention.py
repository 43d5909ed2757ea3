"""Multi-head attention with a decoding cache (Vaswani et al., 2017, section 3.2.2)."""

import keras
from keras import ops
from keras.src.backend import get_keras_mask, set_keras_mask

from keras_attention.base.validation import check_rate
from keras_attention.layers import attention_ops
from keras_attention.layers.validation import check_mask, static_int


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` plus a key/value cache for decoding.

    MultiHead(Q, K, V) = Concat(head_1..head_h) W^O with head_i =
    Attention(Q W_i^Q, K W_i^K, V W_i^V), from "Attention Is All You Need"
    (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762), section 3.2.2:
    each head attends in its own `key_dim`-sized subspace, so the model can
    look at different positions for different reasons at the cost of one
    full-width attention.

    Everything Keras' layer does, this layer does the same way (it is a
    subclass): arguments, weights, masks, config, and the fused
    `keras.ops.dot_product_attention` (with Keras' flash-attention switch)
    when no weights are returned and there is no attention dropout. Two
    things are added:

    - A cache for step-by-step decoding. `init_cache` makes an empty one for
      self-attention and `compute_cache` projects an encoder output once for
      cross-attention; pass it as `cache`. With `cache_update_index` (the
      position of the first new token) the new tokens' keys and values are
      written into the cache and the updated cache is returned; with
      `use_causal_mask=True` the causal mask is offset by that index, so a
      step-by-step pass gives the numbers of a full pass; without it the
      new tokens attend to every filled slot (never to the empty ones after
      them). Padding masks are honoured while the cache is filled: a
      `(B, T_new)` mask covers the new tokens' slots (earlier slots count as
      real), a `(B, T_max)` mask covers the whole cache, which keeps a padded
      prompt's slots hidden in every later step. The index must leave room
      for the new tokens (`0 <= index <= T_max - T_new`); a value known when
      the call is traced is checked. Without `cache_update_index` the cache
      is read as it is. The cache is head-major, `(B, N, T, H)`: the layout
      the attention products read, so a decoding step reads it in place
      instead of transposing it.
    - The softmax of the explicit path runs in float32 under mixed precision
      (Keras' runs in the compute dtype), as the fused path already does.

    Args:
        num_heads: int. Number of attention heads, N.
        key_dim: int. Size of each head for query and key, H.
        value_dim: int. Size of each head for value. Defaults to `key_dim`.
        dropout: float. Dropout rate on the attention weights. Defaults to 0.
        **kwargs: every other argument of `keras.layers.MultiHeadAttention`
            (`use_bias`, `output_shape`, initializers, `seed`, `name`,
            `dtype`, ...).

    Call arguments:
        query: `(B, T_q, d_q)`.
        value: `(B, T_v, d_v)`.
        key: `(B, T_v, d_k)`. Defaults to `value`.
        query_mask, value_mask, key_mask: boolean `(B, T)` padding masks;
            filled in from Keras masks when not given. While a cache is
            filled, `(B, T_new)` or `(B, T_max)` (see above).
        attention_mask: boolean `(B, T_q, T_k)`, True where attention is
            allowed; `T_k` is `T_v`, or the cache length with a cache.
        use_causal_mask: bool. Query `i` attends to keys `j <= i` only.
        return_attention_scores: bool. Also return the weights `(B, N, T_q, T_v)`.
        cache: a `(keys, values)` pair, each `(B, N, T_max, H)`, or None.
        cache_update_index: int or scalar int tensor, where the new keys and
            values go in `cache`; None to read the cache without updating it.
        training: bool. Whether dropout is active.

    Returns:
        `output` `(B, T_q, d_out)`; followed by the weights if
        `return_attention_scores`, and by the cache if `cache` was given:
        `output`, `(output, scores)`, `(output, cache)` or
        `(output, scores, cache)`.

    Example:

    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = keras.random.normal((3, 5, 8))
    >>> y, scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    >>> tuple(y.shape), tuple(scores.shape)
    ((3, 5, 8), (3, 2, 5, 5))
    """

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, **kwargs):
        super().__init__(num_heads, key_dim, value_dim=value_dim, dropout=check_rate("dropout", dropout), **kwargs)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(
                    f"`{name}` must have shape (batch, length, features) with a known "
                    f"feature size. Received: {name}.shape={tuple(shape)}"
                )
        super().build(query_shape, value_shape, key_shape)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "output_dim" in config:  # the name keras-attention 0.2 used
            config["output_shape"] = config.pop("output_dim")
        return super().from_config(config)

    def load_own_variables(self, store):
        """Keras' loading, plus the weights of layers saved by keras-attention 0.2.

        0.2 kept the query, key, value and output kernels (and biases) on the
        layer itself, with the shapes of Keras' projections: they go to
        `query_dense`, `key_dense`, `value_dense` and `output_dense`, so a
        model saved by 0.2 loads with the same weights.
        """
        saved = len(store.keys()) if store is not None else 0
        if saved == len(self._trainable_variables + self._non_trainable_variables):  # Keras' own layout
            return super().load_own_variables(store)
        projections = [self._query_dense, self._key_dense, self._value_dense, self._output_dense]
        per_projection = 2 if self._use_bias else 1
        if saved != 4 * per_projection:
            raise ValueError(
                f"Layer {self.name!r} expected the {4 * per_projection} weights that keras-attention 0.2 saved "
                f"for its projections, but received {saved}."
            )
        values = [store[str(i)] for i in range(saved)]
        for i, projection in enumerate(projections):
            for variable, value in zip(projection.weights, values[i * per_projection:(i + 1) * per_projection]):
                variable.assign(value)
            projection.load_own_variables = lambda store: None  # loaded here; the 0.2 file has nothing for them

    def _masked_softmax(self, attention_scores, attention_mask=None):
        if attention_mask is not None:
            while len(attention_mask.shape) < len(attention_scores.shape):
                attention_mask = ops.expand_dims(attention_mask, -3)  # (B, 1, T_q, T_k): shared by heads
        return attention_ops.masked_softmax(attention_scores, attention_mask)

    # The cache -----------------------------------------------------------------

    def init_cache(self, batch_size, max_length, dtype=None):
        """An all-zero self-attention cache: keys and values, each `(B, N, max_length, H)`."""
        self._check_cacheable()
        shape = (batch_size, self.num_heads, max_length, self.key_dim)
        dtype = dtype or self.compute_dtype
        return ops.zeros(shape, dtype=dtype), ops.zeros(shape, dtype=dtype)

    def compute_cache(self, value, key=None):
        """Keys and values `(B, N, T_v, H)` of an encoder output, projected once for cross-attention."""
        key = value if key is None else key
        if not self.built:
            self.build(ops.shape(value), ops.shape(value), ops.shape(key))
        # The projections ignore masks: project copies, so the caller's tensors keep theirs.
        keys, values = self._key_dense(ops.copy(key)), self._value_dense(ops.copy(value))  # (B, T_v, N, H)
        return _heads_first(keys), _heads_first(values)  # (B, N, T_v, H)

    def _check_cacheable(self):
        if self.value_dim != self.key_dim:
            raise ValueError(
                "A key/value cache needs `value_dim == key_dim`. Received: "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )

    def _check_cache_index(self, index, new_length, cache_length):
        """One error for an index that leaves no room for the new tokens, on every backend."""
        if None not in (new_length, cache_length) and new_length > cache_length:
            raise ValueError(f"{new_length} new tokens do not fit a cache of {cache_length} slots. "
                             f"Received: a key of {new_length} positions, cache length {cache_length}")
        index = static_int(index)
        if index is None or None in (new_length, cache_length):
            return  # traced: the program that feeds the index keeps it in range
        if not 0 <= index <= cache_length - new_length:
            raise ValueError(
                f"`cache_update_index` must be in [0, {cache_length - new_length}]: {new_length} new "
                f"token(s) in a cache of {cache_length} slots. Received: cache_update_index={index}"
            )

    def compute_output_spec(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
                            attention_mask=None, return_attention_scores=False, training=None,
                            use_causal_mask=False, cache=None, cache_update_index=None):
        """Symbolic outputs in `call`'s order: output, weights `(B, N, T_q, T_k)`, cache."""
        key = value if key is None else key
        output = keras.KerasTensor(self.compute_output_shape(query.shape, value.shape, key.shape),
                                   dtype=self.compute_dtype)
        outputs = (output,)
        if return_attention_scores:
            keys_length = key.shape[1] if cache is None else cache[0].shape[2]
            outputs += (keras.KerasTensor((query.shape[0], self.num_heads, query.shape[1], keys_length),
                                          dtype=self.compute_dtype),)
        if cache is not None:
            outputs += (tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache),)
        return outputs[0] if len(outputs) == 1 else outputs

    # Forward -------------------------------------------------------------------

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        self._check_masks(query, value, key, query_mask, value_mask, key_mask, attention_mask, cache)
        if query_mask is not None:
            # Keras' layer reads the query mask from the query's Keras mask
            # only; one passed by hand masks the query rows the same way.
            rows = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # (B, T_q, 1)
            attention_mask = attention_ops.combine_masks(attention_mask, rows)
        if cache is None and cache_update_index is not None:
            raise ValueError(
                "`cache_update_index` needs a `cache`. Received: cache=None, "
                f"cache_update_index={cache_update_index}"
            )
        # Keras' layer clears the Keras masks of the tensors it is given (its projections must not see
        # them); they are put back after, so a tensor that feeds several layers (an encoder output read by
        # each decoder block) keeps its padding mask for the next one.
        inputs = [x for x in (query, value, key) if x is not None]
        masks = [get_keras_mask(x) for x in inputs]
        try:
            if cache is None:
                return super().call(
                    query,
                    value,
                    key=key,
                    value_mask=value_mask,
                    key_mask=key_mask,
                    attention_mask=attention_mask,
                    return_attention_scores=return_attention_scores,
                    training=training,
                    use_causal_mask=use_causal_mask,
                )
            return self._call_with_cache(
                query, value, key, value_mask, key_mask, attention_mask,
                return_attention_scores, training, use_causal_mask, cache, cache_update_index,
            )
        finally:
            for x, mask in zip(inputs, masks):
                if mask is not None:
                    set_keras_mask(x, mask)

    def _check_masks(self, query, value, key, query_mask, value_mask, key_mask, attention_mask, cache):
        batch, query_length = query.shape[0], query.shape[1]
        keys_length = (value if key is None else key).shape[1]
        check_mask("query_mask", query_mask, (batch, query_length))
        if cache is None:
            check_mask("value_mask", value_mask, (batch, keys_length))
            check_mask("key_mask", key_mask, (batch, keys_length))
            check_mask("attention_mask", attention_mask, (batch, query_length, keys_length), broadcast=True)
            return
        check_cache("cache", cache)
        cache_length = cache[0].shape[2]
        for name, mask in (("value_mask", value_mask), ("key_mask", key_mask)):
            length = keys_length
            if mask is not None and len(mask.shape) == 2 and mask.shape[1] == cache_length:
                length = cache_length  # a mask over the whole cache
            check_mask(name, mask, (batch, length))
            if mask is not None and len(mask.shape) == 2 and None in (mask.shape[1], cache_length) and (
                    keys_length != cache_length):
                raise ValueError(f"While a cache is filled, `{name}` needs a length known when the call is traced "
                                 f"(the new tokens' or the cache's). Received: {name}.shape={tuple(mask.shape)}, "
                                 f"cache length {cache_length}")
        check_mask("attention_mask", attention_mask, (batch, query_length, cache_length), broadcast=True)

    def _call_with_cache(
        self, query, value, key, value_mask, key_mask, attention_mask,
        return_attention_scores, training, use_causal_mask, cache, cache_update_index,
    ):
        key = value if key is None else key
        for x in (query, value, key):
            set_keras_mask(x, None)  # as Keras' layer does: the masks are handled here, not by the projections
        offset = 0
        if cache_update_index is None:
            keys, values = cache  # (B, N, T_k, H) each, projected once
        else:
            self._check_cacheable()
            new_length, cache_length = ops.shape(key)[1], ops.shape(cache[0])[2]  # static where known
            self._check_cache_index(cache_update_index, key.shape[1], cache[0].shape[2])
            new_keys = _heads_first(ops.cast(self._key_dense(key), cache[0].dtype))  # (B, N, T_new, H)
            new_values = _heads_first(ops.cast(self._value_dense(value), cache[1].dtype))
            start = [0, 0, cache_update_index, 0]
            keys = ops.slice_update(cache[0], start, new_keys)  # (B, N, T_max, H)
            values = ops.slice_update(cache[1], start, new_values)
            cache = (keys, values)
            offset = cache_update_index
            value_mask, key_mask = (
                _over_cache(mask, cache_update_index, new_length, cache_length) for mask in (value_mask, key_mask)
            )
            if not use_causal_mask:  # the slots after the new tokens are empty
                filled = ops.arange(cache_length) < cache_update_index + new_length  # (T_max,)
                attention_mask = attention_ops.combine_masks(attention_mask, filled[None, None, :])
        query = self._query_dense(query)  # (B, T_q, N, H)
        mask = attention_ops.combine_masks(
            attention_mask,
            attention_ops.padding_to_attention_mask(key_mask=value_mask),
            None if key_mask is None else attention_ops.padding_to_attention_mask(key_mask=key_mask),
            attention_ops.causal_mask(ops.shape(query)[1], ops.shape(keys)[2], offset) if use_causal_mask else None,
        )
        output, scores = self._attend_to_cache(query, keys, values, mask, training)
        output = self._output_dense(output)  # (B, T_q, d_out)
        return (output, scores, cache) if return_attention_scores else (output, cache)

    def _attend_to_cache(self, query, keys, values, mask, training):
        """Scaled dot-product attention of `query` `(B, T_q, N, H)` over head-major
        `keys` and `values` `(B, N, T_k, H)`: the output `(B, T_q, N, H)` and the
        weights `(B, N, T_q, T_k)`. The same products as Keras' explicit path,
        with the batch and head axes leading on both sides."""
        query = _heads_first(query * ops.cast(self._inverse_sqrt_key_dim, query.dtype))  # (B, N, T_q, H)
        scores = ops.einsum("bnqh,bnkh->bnqk", query, keys)  # (B, N, T_q, T_k)
        scores = self._masked_softmax(scores, mask)
        weights = self._dropout_layer(scores, training=training) if self._dropout > 0.0 else scores
        output = ops.einsum("bnqk,bnkh->bqnh", weights, values)  # (B, T_q, N, H)
        return output, scores


def check_cache(name, cache):
    """Raise ValueError unless `cache` is a `(keys, values)` pair of rank-4 tensors, naming the argument."""
    shapes = [tuple(t.shape) for t in cache] if isinstance(cache, (tuple, list)) else None
    if shapes is None or len(shapes) != 2 or any(len(shape) != 4 for shape in shapes):
        received = shapes if shapes is not None else f"{type(cache).__name__} of shape {getattr(cache, 'shape', None)}"
        raise ValueError(
            f"`{name}` must be a pair of keys and values, each (B, N, T, H), as the layers' `init_cache` and "
            f"`compute_cache` return them (keras-hub's single (B, 2, T, N, H) tensor is not one). "
            f"Received: {received}"
        )


def _over_cache(mask, index, new_length, cache_length):
    """A `(B, T_new)` mask of the new tokens -> `(B, T_max)` over the cache (True elsewhere); a
    `(B, T_max)` mask as it is."""
    if mask is None or (mask.shape[1] is not None and mask.shape[1] == cache_length):
        return mask
    slots = ops.arange(cache_length)  # (T_max,)
    inside = ops.logical_and(slots >= index, slots < index + new_length)
    new = ops.take(ops.cast(mask, "bool"), ops.clip(slots - index, 0, new_length - 1), axis=1)  # (B, T_max)
    return ops.logical_or(new, ops.logical_not(inside)[None, :])


def _heads_first(x):
    """`(B, T, N, H)` -> `(B, N, T, H)`."""
    return ops.transpose(x, (0, 2, 1, 3))
