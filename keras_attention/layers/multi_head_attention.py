"""Multi-head attention (Vaswani et al., 2017, section 3.2.2)."""

import keras
from keras import ops

from keras_attention.layers import attention_ops
from keras_attention.layers.validation import check_positive_int, check_rate


def _to_cache_layout(keys, values):
    """`(B, T, N, H)` keys and values -> the cache's `(B, N, H, T)` keys and `(B, N, T, H)` values."""
    return ops.transpose(keys, (0, 2, 3, 1)), ops.transpose(values, (0, 2, 1, 3))


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with an optional key/value cache.

    Implements MultiHead(Q, K, V) = Concat(head_1..head_h) W^O with
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), from "Attention Is All You
    Need" (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762), section
    3.2.2. Each head attends in its own `key_dim`-sized subspace, so the model
    can look at different positions for different reasons at the cost of one
    full-width attention.

    The weights have the same shapes and meaning as those of
    `keras.layers.MultiHeadAttention` (query/key/value kernels `(d, N, H)`,
    output kernel `(N, H_v, d_out)`), so weights can be copied between them and
    the two give the same numbers.

    Masking: Keras masks on `query`, `value` and `key` are picked up
    automatically (a padded key gets zero weight; a padded query row is masked
    too, as in Keras). `attention_mask` adds an explicit boolean mask of shape
    `(B, T_q, T_k)`, and `use_causal_mask=True` lets query `i` see keys `j <= i`
    only. All masks are combined with a logical AND. Causal attention over 128
    or more queries runs by blocks of queries and skips the keys above the
    diagonal (see `scaled_dot_product_attention`).

    Incremental decoding: pass a `cache`, a pair of keys `(B, N, H, T_max)`
    and values `(B, N, T_max, H)` (see `init_cache`; the layout in which both
    attention products read them as stored), and `cache_update_index`,
    the position of the first new token. The layer writes the new tokens' keys
    and values into the cache, attends over it and returns the updated cache;
    with `use_causal_mask=True` the causal mask is offset by the index, so a
    step-by-step pass gives the same numbers as a full pass. With a `cache` and
    no `cache_update_index` the cache is used as is (cross-attention over a
    fixed encoder output, projected once with `compute_cache`).

    Args:
        num_heads: int. Number of attention heads, N.
        key_dim: int. Size of each head for query and key, H.
        value_dim: int. Size of each head for value. Defaults to `key_dim`.
        dropout: float. Dropout rate on the attention weights. Defaults to 0.
        use_bias: bool. Whether the projections have biases. Defaults to True.
        output_dim: int. Size of the output features. Defaults to the query's
            last dimension.
        kernel_initializer: initializer for the kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer for the biases. Defaults to `"zeros"`.
        seed: int. Seed for the attention dropout. Defaults to None.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, T_q, d_q)`.
        value: `(B, T_v, d_v)`.
        key: `(B, T_v, d_k)`. Defaults to `value`.
        query_mask, value_mask, key_mask: boolean `(B, T)` padding masks;
            filled in from Keras masks when not given.
        attention_mask: boolean `(B, T_q, T_v)`, True where attention is allowed.
        use_causal_mask: bool. Apply a causal (lower-triangular) mask.
        return_attention_scores: bool. Also return the weights `(B, N, T_q, T_v)`.
        cache: a `(keys (B, N, H, T_max), values (B, N, T_max, H))` pair, or None.
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

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.key_dim = check_positive_int("key_dim", key_dim)
        self.value_dim = check_positive_int(
            "value_dim", key_dim if value_dim is None else value_dim
        )
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = bool(use_bias)
        self.output_dim = (
            None if output_dim is None else check_positive_int("output_dim", output_dim)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(
                    f"`{name}` must have shape (batch, length, features) with a known "
                    f"feature size. Received: {name}.shape={tuple(shape)}"
                )
        n, h, hv = self.num_heads, self.key_dim, self.value_dim
        out_dim = self.output_dim or query_shape[-1]

        def projection(name, in_dim, head_dim):
            kernel = self.add_weight(
                name=f"{name}_kernel",
                shape=(in_dim, n, head_dim),
                initializer=self.kernel_initializer,
            )
            bias = None
            if self.use_bias:
                bias = self.add_weight(
                    name=f"{name}_bias", shape=(n, head_dim), initializer=self.bias_initializer
                )
            return kernel, bias

        self.query_kernel, self.query_bias = projection("query", query_shape[-1], h)
        self.key_kernel, self.key_bias = projection("key", key_shape[-1], h)
        self.value_kernel, self.value_bias = projection("value", value_shape[-1], hv)
        self.output_kernel = self.add_weight(
            name="output_kernel", shape=(n, hv, out_dim), initializer=self.kernel_initializer
        )
        self.output_bias = None
        if self.use_bias:
            self.output_bias = self.add_weight(
                name="output_bias", shape=(out_dim,), initializer=self.bias_initializer
            )
        self.built = True

    # Projections -------------------------------------------------------------

    def _project(self, x, kernel, bias):
        """(B, T, d) -> (B, T, N, H) with one matrix product."""
        d, n, h = kernel.shape
        y = attention_ops.dense_project(x, ops.reshape(kernel, (d, n * h)), bias)  # (B, T, N*H)
        return ops.reshape(y, (ops.shape(x)[0], ops.shape(x)[1], n, h))  # (B, T, N, H)

    def compute_cache(self, value, key=None):
        """Project an encoder output once, for cross-attention while decoding.

        Args:
            value: `(B, T_v, d_v)`. key: `(B, T_v, d_k)`, defaults to `value`.

        Returns:
            `(keys (B, N, H, T_v), values (B, N, T_v, H))`, projected, to
            pass as `cache` (with `cache_update_index=None`) at every
            decoding step.
        """
        key = value if key is None else key
        if not self.built:
            self.build(ops.shape(value), ops.shape(value), ops.shape(key))
        k = self._project(key, self.key_kernel, self.key_bias)
        v = self._project(value, self.value_kernel, self.value_bias)
        return _to_cache_layout(k, v)

    def init_cache(self, batch_size, max_length, dtype=None):
        """An all-zero self-attention cache: keys `(B, N, H, max_length)`, values `(B, N, max_length, H)`."""
        self._check_cacheable()
        dtype = dtype or self.compute_dtype
        return (
            ops.zeros((batch_size, self.num_heads, self.key_dim, max_length), dtype=dtype),
            ops.zeros((batch_size, self.num_heads, max_length, self.key_dim), dtype=dtype),
        )

    def _check_cache(self, cache):
        shapes = [tuple(t.shape) for t in cache] if isinstance(cache, (tuple, list)) else None
        if shapes is None or len(shapes) != 2 or any(len(shape) != 4 for shape in shapes):
            received = shapes if shapes is not None else f"{type(cache).__name__} of shape {getattr(cache, 'shape', None)}"
            raise ValueError(
                "`cache` must be a pair: keys (B, N, H, T) and values (B, N, T, H), as `init_cache` and "
                f"`compute_cache` return them. Received: {received}"
            )

    def _check_cacheable(self):
        if self.value_dim != self.key_dim:
            raise ValueError(
                "A key/value cache needs `value_dim == key_dim`. Received: "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )

    # Forward -----------------------------------------------------------------

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        cache=None,
        cache_update_index=None,
        training=None,
    ):
        key = value if key is None else key
        # Three separate products for Q, K and V, also in self-attention. One
        # product on the concatenated kernels runs at a higher rate alone, but
        # the layer was then slower at 64 tokens and needed more memory than
        # Keras' at 64 and 128 (the concatenated kernel and the whole
        # product's output live at once), and a Transformer training step was
        # no faster (benchmarks/RESULTS.md at 8068402, attention layer).
        q = self._project(query, self.query_kernel, self.query_bias)  # (B, T_q, N, H)

        offset = 0
        if cache is not None:
            self._check_cache(cache)
        if cache is None:
            k = self._project(key, self.key_kernel, self.key_bias)  # (B, T_k, N, H)
            v = self._project(value, self.value_kernel, self.value_bias)  # (B, T_k, N, Hv)
        elif cache_update_index is None:
            k, v = cache  # (B, N, H, T_k), (B, N, T_k, H), precomputed
        else:
            self._check_cacheable()
            new_k = self._project(key, self.key_kernel, self.key_bias)  # (B, T_new, N, H)
            new_v = self._project(value, self.value_kernel, self.value_bias)  # (B, T_new, N, H)
            new_k, new_v = _to_cache_layout(new_k, new_v)  # (B, N, H, T_new), (B, N, T_new, H)
            k = ops.slice_update(cache[0], [0, 0, 0, cache_update_index], ops.cast(new_k, cache[0].dtype))
            v = ops.slice_update(cache[1], [0, 0, cache_update_index, 0], ops.cast(new_v, cache[1].dtype))
            cache = (k, v)  # (B, N, H, T_max), (B, N, T_max, H)
            offset = cache_update_index
            # The padding masks describe the new tokens only; the cache slots
            # beyond them are hidden by the causal mask.
            value_mask = key_mask = None

        if key is value:
            key_mask = None  # as in Keras: the value mask already covers the keys
        mask = attention_ops.combine_masks(
            attention_ops.padding_to_attention_mask(query_mask, value_mask),
            None if key_mask is None else ops.expand_dims(ops.cast(key_mask, "bool"), -2),
            attention_mask,
            attention_ops.causal_mask(ops.shape(q)[1], ops.shape(k)[-1], offset)
            if use_causal_mask and cache is not None
            else None,
        )

        context, scores = attention_ops.scaled_dot_product_attention(
            q,
            k,
            v,
            mask=mask,
            dropout=self.dropout,
            training=training,
            seed=self.seed_generator,
            cache_layout=cache is not None,
            causal=use_causal_mask and cache is None,
        )  # context (B, T_q, N, Hv), scores (B, N, T_q, T_k)

        n, hv, out_dim = self.output_kernel.shape
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (batch, length, n * hv))  # (B, T_q, N*Hv)
        output = attention_ops.dense_project(
            context, ops.reshape(self.output_kernel, (n * hv, out_dim)), self.output_bias
        )  # (B, T_q, d_out)

        results = (output,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config
