"""Decoding: greedy, beam search and sampling over the models' step interface."""

from keras_attention.decoding.beam_search import beam_search, length_penalty_factor
from keras_attention.decoding.common import DecodeResult
from keras_attention.decoding.greedy import greedy_decode
from keras_attention.decoding.sampling import sample, top_k_filter, top_p_filter
from keras_attention.decoding.translator import Translation, Translator
from keras_attention.decoding.uncached import UncachedDecoder

__all__ = [
    "DecodeResult",
    "Translation",
    "Translator",
    "UncachedDecoder",
    "beam_search",
    "greedy_decode",
    "length_penalty_factor",
    "sample",
    "top_k_filter",
    "top_p_filter",
]
