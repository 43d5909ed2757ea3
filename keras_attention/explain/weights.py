"""Every attention weight a translator used on a sentence, as NumPy arrays.

The sentence is decoded first (greedy or beam search); then one teacher-forced
pass over the decoded output collects the weights. With causal self-attention
and teacher forcing, row t of that pass is exactly the computation of decoding
step t, so these are the weights the decoder used.
"""

import dataclasses
import warnings

import numpy as np
from keras import ops

from keras_attention.base.validation import check_choice
from keras_attention.decoding.options import SEARCH_METHODS, decoding_options
from keras_attention.decoding.translator import Translator
from keras_attention.models import Seq2SeqRNN, Transformer

KINDS = ("encoder", "decoder", "cross")


@dataclasses.dataclass
class SentenceAttention:
    """The attention weights of one translated sentence.

    Attributes:
        source: the sentence as given.
        translation: the decoded translation.
        source_tokens: the source pieces the model read, [START] and [END]
            included, written as the tokenizer writes them ("##" marks a
            piece that continues a word).
        target_tokens: the output pieces, one per decoding step ([END] last).
        decoder_input_tokens: what the decoder read at each step: [START],
            then the output pieces but the last.
        weights: dict from "encoder" (source self-attention, `(L, N, S, S)`),
            "decoder" (causal target self-attention, `(L, N, T, T)`) and
            "cross" (target over source, `(L, N, T, S)`) to float32 arrays:
            L layers, N heads, S source and T target pieces. An RNN model has
            "cross" only, `(1, 1, T, S)`: its alignment.
        truncated: True if the source was cut to the model's maximum length.
    """

    source: str
    translation: str
    source_tokens: list
    target_tokens: list
    decoder_input_tokens: list
    weights: dict
    truncated: bool = False

    @property
    def num_layers(self):
        return self.weights["cross"].shape[0]

    @property
    def num_heads(self):
        return self.weights["cross"].shape[1]


def collect_attention(translator, sentences, options=None, **settings):
    """Translate `sentences` and gather every attention weight of each.

    Args:
        translator: a `Translator` (a Transformer or an attention RNN).
        sentences: a str or a list of str, none empty.
        options: a `decoding.DecodingOptions` of method `"greedy"` or
            `"beam"`, or a method name. Defaults to None (greedy).
        **settings: fields of `DecodingOptions` that replace those of `options`.

    Returns:
        A list of `SentenceAttention`, one a sentence.

    Example:

    >>> found = collect_attention(translator, ["A dog runs."])  # doctest: +SKIP
    >>> found[0].weights["cross"].shape  # doctest: +SKIP
    (3, 8, 7, 6)
    """
    if not isinstance(translator, Translator):
        raise TypeError(f"`translator` must be a Translator. Received: {type(translator).__name__}")
    model = translator.model
    if isinstance(model, Seq2SeqRNN) and model.attention is None:
        raise ValueError("This model has no attention to show: it is the fixed-vector RNN (attention=None).")
    if not isinstance(model, (Seq2SeqRNN, Transformer)):
        raise TypeError(f"Only Transformer and Seq2SeqRNN models are supported. Received: {type(model).__name__}")
    options = decoding_options(options, **settings)
    check_choice("method", options.method, SEARCH_METHODS)
    sentences = [sentences] if isinstance(sentences, str) else list(sentences)
    empty = [i for i, s in enumerate(sentences) if not s.strip()]
    if not sentences or empty:
        raise ValueError(f"Nothing to explain: sentence {empty[0] + 1 if empty else 1} is empty.")
    return [_collect_one(translator, sentence, options) for sentence in sentences]


def _collect_one(translator, sentence, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation is reported on the result instead
        translation = translator.translate([sentence], options, return_attention=True)
    source_ids = translator.source_ids([sentence])[0]  # (1, S)
    target_tokens = translation.target_tokens[0]
    outputs = np.asarray(translation.tokens[0][: len(target_tokens)], "int32")  # (T,)
    start = translator.target_tokenizer.start_id
    target_in = np.concatenate([[start], outputs[:-1]])[None].astype("int32")  # (1, T)
    model = translator.model
    if isinstance(model, Transformer):
        weights = _transformer_weights(model, source_ids, target_in)
    else:
        _, alignment = model((source_ids, target_in), training=False, return_attention=True)  # (1, T, S)
        weights = {"cross": np.asarray(alignment, "float32")[:, None]}  # (1, 1, T, S)
    vocabulary = translator.target_tokenizer.vocabulary
    return SentenceAttention(
        source=sentence,
        translation=translation.texts[0],
        source_tokens=translation.source_tokens[0],
        target_tokens=target_tokens,
        decoder_input_tokens=[vocabulary[i] for i in target_in[0]],
        weights=weights,
        truncated=bool(translation.truncated),
    )


def _transformer_weights(model, source_ids, target_in):
    """Teacher-forced pass through every block, keeping each one's weights: arrays `(L, N, ., .)`."""
    source_mask = ops.not_equal(source_ids, 0)
    x = model.source_embedding(source_ids)  # (1, S, d)
    encoder = []
    for block in model.encoder_blocks:
        x, scores = block(x, padding_mask=source_mask, return_attention_scores=True)  # (1, N, S, S)
        encoder.append(scores)
    if model.encoder_norm is not None:
        x = model.encoder_norm(x)
    y = model.target_embedding(target_in)  # (1, T, d)
    decoder, cross = [], []
    for block in model.decoder_blocks:
        y, cross_scores, self_scores = block(
            y, x, encoder_padding_mask=source_mask,
            return_attention_scores=True, return_self_attention_scores=True,
        )  # (1, T, d), (1, N, T, S), (1, N, T, T)
        cross.append(cross_scores)
        decoder.append(self_scores)

    def stack(per_layer):
        return np.concatenate([np.asarray(ops.cast(s, "float32")) for s in per_layer])  # (L, N, ., .)

    return {"encoder": stack(encoder), "decoder": stack(decoder), "cross": stack(cross)}
