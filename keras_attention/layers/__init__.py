"""Attention layers: one public layer a module."""

from keras_attention.layers import legacy  # noqa: F401  (loads files saved by 0.2)

from keras_attention.layers.attention_ops import causal_mask, scaled_dot_product_attention
from keras_attention.layers.bahdanau_attention import BahdanauAttention
from keras_attention.layers.luong_attention import LuongAttention
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.positional_embedding import PositionalEmbedding
from keras_attention.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from keras_attention.layers.transformer_decoder import TransformerDecoder
from keras_attention.layers.transformer_encoder import TransformerEncoder

__all__ = [
    "BahdanauAttention",
    "LuongAttention",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "SinusoidalPositionEncoding",
    "TransformerDecoder",
    "TransformerEncoder",
    "causal_mask",
    "scaled_dot_product_attention",
]
