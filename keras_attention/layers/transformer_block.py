"""What the Transformer encoder and decoder blocks share: config, residual sublayers, FFN."""

import keras
from keras.src.backend import get_keras_mask

from keras_attention.base.validation import check_positive_int, check_rate
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.validation import refuse_positional, require_keywords


def keras_mask_of(x):
    """The Keras mask a previous layer attached to `x`, or None.

    Keras keeps it as an attribute of the tensor, or (for JAX arrays, which
    take no attributes) in a table that `get_keras_mask` reads; Keras has no
    public name for that function yet.
    """
    return get_keras_mask(x)


class TransformerBlock(keras.layers.Layer):
    """Base of `TransformerEncoder` and `TransformerDecoder` (not used directly).

    Holds the arguments both blocks take, builds the position-wise feed-forward
    network FFN(x) = act(x W_1 + b_1) W_2 + b_2 (Vaswani et al., 2017, section
    3.3) and wraps each sublayer in its residual connection and layer norm:
    post-norm `norm(x + dropout(f(x)))` as in the paper (section 5.4), or
    pre-norm `x + dropout(f(norm(x)))` with `normalize_first=True`, which
    trains deep stacks more stably (Xiong et al., 2020).
    """

    def __init__(
        self,
        *args,
        num_heads=None,
        intermediate_dim=None,
        dropout=0.0,
        attention_dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        normalize_first=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        attention_kernel_initializer=None,
        **kwargs,
    ):
        # keras-hub's blocks take (intermediate_dim, num_heads) in that order: keywords only, no mix-up.
        refuse_positional(type(self).__name__, args, ("num_heads", "intermediate_dim"))
        require_keywords(type(self).__name__, num_heads=num_heads, intermediate_dim=intermediate_dim)
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.intermediate_dim = check_positive_int("intermediate_dim", intermediate_dim)
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout = check_rate("attention_dropout", attention_dropout)
        self.activation = keras.activations.get(activation)
        if not layer_norm_epsilon > 0:
            raise ValueError(
                "`layer_norm_epsilon` must be positive. "
                f"Received: layer_norm_epsilon={layer_norm_epsilon!r}"
            )
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.normalize_first = bool(normalize_first)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.attention_kernel_initializer = (
            None if attention_kernel_initializer is None else keras.initializers.get(attention_kernel_initializer)
        )
        self.supports_masking = True

    # Builders -----------------------------------------------------------------

    def _check_model_dim(self, shape, name, split_into_heads=True):
        """The width of `name`; it divides into heads when the attention's sizes come from it (the keys and
        values of cross-attention are projected to the decoder's head size, whatever the encoder's width)."""
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                f"`{name}` must have shape (batch, length, d_model). Received: {name}.shape={tuple(shape)}"
            )
        d_model = shape[-1]
        if split_into_heads and d_model % self.num_heads:
            raise ValueError(
                f"The model width must divide evenly into heads. Received: "
                f"{name}.shape[-1]={d_model}, num_heads={self.num_heads}"
            )
        return d_model

    def _sublayer_kwargs(self):
        return {
            "kernel_initializer": self.kernel_initializer,
            "bias_initializer": self.bias_initializer,
            "dtype": self.dtype_policy,
        }

    def _make_attention(self, name, d_model, query_shape, value_shape):
        kwargs = self._sublayer_kwargs()
        if self.attention_kernel_initializer is not None:
            kwargs["kernel_initializer"] = self.attention_kernel_initializer
        layer = MultiHeadAttention(
            self.num_heads,
            d_model // self.num_heads,
            dropout=self.attention_dropout,
            name=name,
            **kwargs,
        )
        layer.build(query_shape, value_shape)
        return layer

    def _make_norm(self, name, shape):
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
        )
        layer.build(shape)
        return layer

    def _build_feedforward(self, shape):
        d_model = shape[-1]
        self.feedforward_intermediate = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            name="feedforward_intermediate",
            **self._sublayer_kwargs(),
        )
        self.feedforward_intermediate.build(shape)
        self.feedforward_output = keras.layers.Dense(
            d_model, name="feedforward_output", **self._sublayer_kwargs()
        )
        self.feedforward_output.build(tuple(shape[:-1]) + (self.intermediate_dim,))
        self.feedforward_norm = self._make_norm("feedforward_norm", shape)
        self.residual_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        """The blocks keep their input's shape, `(B, T, d_model)`."""
        return tuple(inputs_shape)

    def _output_spec(self, sequence, keys_length=None, return_attention_scores=False, cache=None):
        """Symbolic outputs: `(B, T, d)`, the weights `(B, N, T, T_k)` if asked, the cache if given."""
        spec = (keras.KerasTensor(self.compute_output_shape(sequence.shape), dtype=self.compute_dtype),)
        if return_attention_scores:
            batch, length = sequence.shape[0], sequence.shape[1]
            spec += (keras.KerasTensor((batch, self.num_heads, length, keys_length), dtype=self.compute_dtype),)
        if cache is not None:
            spec += (tuple(keras.KerasTensor(c.shape, dtype=c.dtype) for c in cache),)
        return spec[0] if len(spec) == 1 else spec

    # Forward helpers ----------------------------------------------------------

    def _pre(self, x, norm):
        return norm(x) if self.normalize_first else x

    def _post(self, x, residual, norm, training):
        x = self.residual_dropout(x, training=training) + residual
        return x if self.normalize_first else norm(x)

    def _feedforward_sublayer(self, x, training):
        y = self._pre(x, self.feedforward_norm)
        y = self.feedforward_output(self.feedforward_intermediate(y))  # (B, T, d_ff) -> (B, T, d)
        return self._post(y, x, self.feedforward_norm, training)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "normalize_first": self.normalize_first,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "attention_kernel_initializer": (
                    None if self.attention_kernel_initializer is None
                    else keras.initializers.serialize(self.attention_kernel_initializer)
                ),
            }
        )
        return config
