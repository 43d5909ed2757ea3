"""Build a translation model from a kind and a preset name (used by the CLI)."""

from keras_attention.base.options import MODEL_KINDS
from keras_attention.base.validation import check_choice
from keras_attention.models.seq2seq_rnn import Seq2SeqRNN
from keras_attention.models.transformer import Transformer

KINDS = MODEL_KINDS
"""The kinds `build_model` makes: "transformer", and "bahdanau", "luong" or "rnn" (no attention) for `Seq2SeqRNN`."""


def build_model(kind, preset, source_vocab_size, target_vocab_size, max_length=256, **overrides):
    """A `Transformer` or `Seq2SeqRNN` of a named size.

    Args:
        kind: "transformer", "bahdanau", "luong" (Seq2SeqRNN with that
            attention) or "rnn" (Seq2SeqRNN without attention).
        preset: "tiny", "small", "base" or "big".
        source_vocab_size: int. Source vocabulary size.
        target_vocab_size: int. Target vocabulary size.
        max_length: int. Longest target the Transformer accepts.
        **overrides: constructor arguments that replace the preset's.

    Returns:
        An unbuilt `keras.Model`.
    """
    check_choice("model", kind, KINDS)
    if kind == "transformer":
        return Transformer.from_preset(preset, source_vocab_size, target_vocab_size, max_length=max_length,
                                       **overrides)
    attention = None if kind == "rnn" else kind
    return Seq2SeqRNN.from_preset(preset, source_vocab_size, target_vocab_size, attention=attention, **overrides)
