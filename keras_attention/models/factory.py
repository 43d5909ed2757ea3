"""Build a translation model from a kind and a preset name (used by the CLI)."""

from keras_attention.layers.validation import check_choice
from keras_attention.models.seq2seq_rnn import Seq2SeqRNN
from keras_attention.models.transformer import PRESETS, Transformer
from keras_attention.options import MODEL_KINDS as KINDS

RNN_PRESETS = {
    "tiny": dict(embedding_dim=64, units=128, dropout=0.1),
    "small": dict(embedding_dim=256, units=256, dropout=0.2),
    "base": dict(embedding_dim=256, units=512, dropout=0.3),
    "big": dict(embedding_dim=512, units=1024, dropout=0.3),
}


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
    check_choice("preset", preset, tuple(PRESETS))
    if kind == "transformer":
        return Transformer(
            source_vocab_size, target_vocab_size, max_length=max_length,
            **{**PRESETS[preset], **overrides},
        )
    attention = None if kind == "rnn" else kind
    return Seq2SeqRNN(
        source_vocab_size, target_vocab_size, attention=attention, **{**RNN_PRESETS[preset], **overrides}
    )
