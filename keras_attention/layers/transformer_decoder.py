"""One Transformer decoder block (Vaswani et al., 2017, section 3.1)."""

import keras

from keras_attention.layers.multi_head_attention import check_cache
from keras_attention.layers.transformer_block import TransformerBlock, keras_mask_of
from keras_attention.layers.validation import check_mask


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerDecoder(TransformerBlock):
    """Masked self-attention, cross-attention over the encoder, feed-forward.

    One of the N identical decoder layers of "Attention Is All You Need"
    (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762), section 3.1. The
    self-attention is causal: position i sees positions <= i only, so with
    teacher forcing (the target shifted right as input) the prediction for
    position i depends only on the outputs before it. The cross-attention
    ("encoder-decoder attention", section 3.2.3) takes its queries from the
    decoder and its keys and values from the encoder output. Each sublayer has
    its residual connection and layer norm, post-norm as in the paper or
    pre-norm with `normalize_first=True`. Called without `encoder_sequence`
    the block has no cross-attention (a decoder-only stack).

    Incremental decoding: `init_self_attention_cache` makes a cache of keys and
    values, `compute_cross_attention_cache` projects the encoder output once;
    then call the block one token at a time with `self_attention_cache`,
    `self_attention_cache_update_index` (the token's position) and
    `cross_attention_cache`. Each step costs one position, and the outputs
    equal those of a full pass over the whole prefix.

    Args (keywords only, as keras-hub's `TransformerDecoder` takes
    `intermediate_dim` first):
        num_heads: int. Heads in both attention sublayers; must divide d_model.
        intermediate_dim: int. Hidden size of the feed-forward network (d_ff).
        dropout: float. Dropout on each sublayer's output (P_drop). Defaults to 0.
        attention_dropout: float. Dropout on attention weights. Defaults to 0.
        activation: feed-forward activation. Defaults to "relu".
        layer_norm_epsilon: float. Defaults to 1e-5.
        normalize_first: bool. Pre-norm instead of post-norm. Defaults to False.
        kernel_initializer: for all dense projections' kernels.
        bias_initializer: for all dense projections' biases.
            Default to "glorot_uniform" and "zeros".
        attention_kernel_initializer: for the attention projections' kernels
            (query, key, value, output), if they should start differently
            from `kernel_initializer`. Defaults to None (`kernel_initializer`).
        **kwargs: standard layer arguments.

    Call arguments:
        decoder_sequence: `(B, T, d_model)`, the embedded target prefix.
        encoder_sequence: `(B, S, d_enc)`, the encoder output (of any width), or None.
        decoder_padding_mask: boolean `(B, T)`. Defaults to the Keras mask of
            `decoder_sequence`. While a cache is filled, `(B, T)` covers the
            new tokens and `(B, T_max)` the whole cache (which keeps a padded
            prompt hidden in later steps), as in `MultiHeadAttention`.
        encoder_padding_mask: boolean `(B, S)`. Defaults to the Keras mask of
            `encoder_sequence`.
        decoder_attention_mask: boolean `(B, T, T_k)`, True where a decoder
            position may attend to a key of the self-attention (`T_k` is `T`,
            or the cache length while decoding); combined with the causal
            and padding masks by a logical AND. Beam search uses it to let each
            hypothesis read only its own prefix in a cache shared by the beam.
        self_attention_cache: a `(keys, values)` pair from `init_self_attention_cache`, or None.
        self_attention_cache_update_index: int or scalar int tensor.
        cross_attention_cache: a `(keys, values)` pair from `compute_cross_attention_cache`, or None.
        use_causal_mask: bool. Defaults to True.
        return_attention_scores: bool. Also return the cross-attention
            weights `(B, N, T, S)` (for alignment plots).
        return_self_attention_scores: bool. Also return the self-attention
            weights `(B, N, T, T_k)` (for `keras_attention.explain`).
        training: bool.

    Returns:
        `outputs` `(B, T, d_model)`, followed by the cross-attention weights if
        requested, the self-attention weights if requested, and the updated
        self-attention cache if one was given.

    Example:

    >>> decoder = TransformerDecoder(num_heads=2, intermediate_dim=32)
    >>> target, source = keras.random.normal((2, 5, 16)), keras.random.normal((2, 9, 16))
    >>> tuple(decoder(target, source).shape)
    (2, 5, 16)
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        d_model = self._check_model_dim(decoder_sequence_shape, "decoder_sequence")
        self.self_attention = self._make_attention(
            "self_attention", d_model, decoder_sequence_shape, decoder_sequence_shape
        )
        self.self_attention_norm = self._make_norm("self_attention_norm", decoder_sequence_shape)
        self.cross_attention = None
        if encoder_sequence_shape is not None:
            self._check_model_dim(encoder_sequence_shape, "encoder_sequence", split_into_heads=False)
            self.cross_attention = self._make_attention(
                "cross_attention", d_model, decoder_sequence_shape, encoder_sequence_shape
            )
            self.cross_attention_norm = self._make_norm(
                "cross_attention_norm", decoder_sequence_shape
            )
        self._build_feedforward(decoder_sequence_shape)
        self.built = True

    def init_self_attention_cache(self, batch_size, max_length, dtype=None):
        """An empty cache for step-by-step decoding: keys and values, each `(B, N, max_length, H)`."""
        return self.self_attention.init_cache(batch_size, max_length, dtype)

    def compute_cross_attention_cache(self, encoder_sequence):
        """Keys and values `(B, N, S, H)` of the encoder output, computed once.

        The cache holds no mask: pass the encoder's padding mask as `encoder_padding_mask` with it at each
        step, or padded source positions are attended to.
        """
        if self.cross_attention is None:
            raise ValueError("This decoder block was built without cross-attention.")
        return self.cross_attention.compute_cache(encoder_sequence)

    def compute_output_spec(
        self,
        decoder_sequence,
        encoder_sequence=None,
        *args,
        self_attention_cache=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        return_self_attention_scores=False,
        **kwargs,
    ):
        _check_cross_scores(encoder_sequence is not None or cross_attention_cache is not None, return_attention_scores)
        keys_length = None
        if cross_attention_cache is not None:
            keys_length = cross_attention_cache[0].shape[2]
        elif encoder_sequence is not None:
            keys_length = encoder_sequence.shape[1]
        spec = self._output_spec(decoder_sequence, keys_length, return_attention_scores, self_attention_cache)
        if not return_self_attention_scores:
            return spec
        spec = spec if isinstance(spec, tuple) else (spec,)
        batch, length = decoder_sequence.shape[0], decoder_sequence.shape[1]
        keys_length = length if self_attention_cache is None else self_attention_cache[0].shape[2]
        weights = keras.KerasTensor((batch, self.num_heads, length, keys_length), dtype=self.compute_dtype)
        cut = 1 + bool(return_attention_scores)  # after the outputs and the cross-attention weights
        return spec[:cut] + (weights,) + spec[cut:]

    def _check_masks(self, decoder_sequence, encoder_sequence, decoder_padding_mask, encoder_padding_mask,
                     decoder_attention_mask, self_attention_cache, cross_attention_cache):
        for name, cache in (("self_attention_cache", self_attention_cache),
                            ("cross_attention_cache", cross_attention_cache)):
            if cache is not None:
                check_cache(name, cache)
        batch, length = decoder_sequence.shape[0], decoder_sequence.shape[1]
        keys_length = length if self_attention_cache is None else self_attention_cache[0].shape[2]
        padding_length = length
        if decoder_padding_mask is not None and len(decoder_padding_mask.shape) == 2:
            if decoder_padding_mask.shape[1] == keys_length:  # a mask over the whole cache
                padding_length = keys_length
        check_mask("decoder_padding_mask", decoder_padding_mask, (batch, padding_length))
        check_mask("decoder_attention_mask", decoder_attention_mask, (batch, length, keys_length), broadcast=True)
        source = encoder_sequence.shape[1] if encoder_sequence is not None else (
            cross_attention_cache[0].shape[2] if cross_attention_cache is not None else None)
        check_mask("encoder_padding_mask", encoder_padding_mask, (batch, source))

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        decoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        use_causal_mask=True,
        return_attention_scores=False,
        return_self_attention_scores=False,
        training=None,
    ):
        has_encoder = encoder_sequence is not None or cross_attention_cache is not None
        if has_encoder != (self.cross_attention is not None):
            raise ValueError(
                "Call the block the way it was built: with `encoder_sequence` if and "
                "only if it has cross-attention. Received: encoder_sequence="
                f"{'None' if encoder_sequence is None else tuple(encoder_sequence.shape)}, "
                f"built with cross-attention: {self.cross_attention is not None}"
            )
        _check_cross_scores(has_encoder, return_attention_scores)
        self._check_masks(decoder_sequence, encoder_sequence, decoder_padding_mask, encoder_padding_mask,
                          decoder_attention_mask, self_attention_cache, cross_attention_cache)
        if decoder_padding_mask is None:
            decoder_padding_mask = keras_mask_of(decoder_sequence)
        if encoder_padding_mask is None and encoder_sequence is not None:
            encoder_padding_mask = keras_mask_of(encoder_sequence)

        # Causal self-attention sublayer (the cache, if any, is updated here).
        x = self._pre(decoder_sequence, self.self_attention_norm)
        result = self.self_attention(
            x,
            x,
            value_mask=decoder_padding_mask,
            attention_mask=decoder_attention_mask,
            use_causal_mask=use_causal_mask,
            cache=self_attention_cache,
            cache_update_index=self_attention_cache_update_index,
            return_attention_scores=return_self_attention_scores,
            training=training,
        )
        result = result if isinstance(result, tuple) else (result,)
        self_scores = result[1] if return_self_attention_scores else None  # (B, N, T, T_k)
        x = result[0]
        if self_attention_cache is not None:
            self_attention_cache = result[-1]
        x = self._post(x, decoder_sequence, self.self_attention_norm, training)  # (B, T, d)

        # Cross-attention sublayer.
        scores = None
        if self.cross_attention is not None:
            residual = x
            x = self._pre(x, self.cross_attention_norm)
            result = self.cross_attention(
                x,
                x if encoder_sequence is None else encoder_sequence,
                value_mask=encoder_padding_mask,
                cache=cross_attention_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            result = result if isinstance(result, tuple) else (result,)
            x = result[0]
            scores = result[1] if return_attention_scores else None  # (B, N, T, S)
            x = self._post(x, residual, self.cross_attention_norm, training)

        # Feed-forward sublayer.
        x = self._feedforward_sublayer(x, training)

        outputs = (x,)
        if return_attention_scores:
            outputs += (scores,)
        if return_self_attention_scores:
            outputs += (self_scores,)
        if self_attention_cache is not None:
            outputs += (self_attention_cache,)
        return outputs[0] if len(outputs) == 1 else outputs


def _check_cross_scores(has_encoder, return_attention_scores):
    """A block without an encoder has no cross-attention weights to return."""
    if return_attention_scores and not has_encoder:
        raise ValueError("`return_attention_scores` returns the cross-attention weights, and a decoder-only block "
                         "has none: use `return_self_attention_scores=True`. Received: return_attention_scores=True "
                         "without `encoder_sequence`")
