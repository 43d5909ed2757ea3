"""Ready-made models built from the attention layers."""

from keras_attention.models import cpu_kernels  # noqa: F401  (registers the CPU twins: trained models may hold them)

from keras_attention.models.decomposable_attention import DecomposableAttention
from keras_attention.models.factory import KINDS, build_model
from keras_attention.models.initializers import headwise_glorot_uniform
from keras_attention.models.seq2seq_rnn import Seq2SeqRNN
from keras_attention.models.transformer import PRESETS, Transformer

__all__ = [
    "DecomposableAttention",
    "KINDS",
    "PRESETS",
    "Seq2SeqRNN",
    "Transformer",
    "build_model",
    "headwise_glorot_uniform",
]
