"""Small untrained translators on the dates vocabularies, for the explorer's tests."""

import numpy as np

from keras_attention import data
from keras_attention.decoding.translator import Translator
from keras_attention.models import Seq2SeqRNN, Transformer

SENTENCES = ["3 March 1999", "Tuesday, July 4, 2023"]


def dates_tokenizers():
    pairs = data.load_dates(500, "train", seed=3)
    source = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: s), 200)
    target = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: t), 40)
    return source, target


def make_translator(tokenizers, kind, num_layers=2, num_heads=4, d_model=16, max_source_length=24,
                    max_target_length=12):
    source, target = tokenizers
    if kind == "transformer":
        model = Transformer(source.vocab_size, target.vocab_size, num_layers=num_layers, d_model=d_model,
                            num_heads=num_heads, intermediate_dim=32, max_length=max(64, max_target_length))
    else:
        model = Seq2SeqRNN(source.vocab_size, target.vocab_size, attention=kind, units=16, embedding_dim=8)
    model((np.ones((1, 4), "int32"), np.ones((1, 3), "int32")))
    return Translator(model, source, target, max_source_length=max_source_length,
                      max_target_length=max_target_length)
