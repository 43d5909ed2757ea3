"""Decoding: greedy, beam search and sampling over the models' step interface.

`DecodingOptions` loads with the package; the rest on first use (PEP 562),
so that the command line builds its decoding flags from `DecodingOptions`
before TensorFlow starts.
"""

import importlib
from typing import TYPE_CHECKING

from keras_attention.decoding.options import DecodingOptions

if TYPE_CHECKING:  # what the lazy names below resolve to, for readers and documentation tools
    from keras_attention.decoding.beam import beam_search, length_penalty_factor
    from keras_attention.decoding.common import DecodeResult
    from keras_attention.decoding.greedy import greedy_decode
    from keras_attention.decoding.sampling import sample, top_k_filter, top_p_filter
    from keras_attention.decoding.translator import Translation, Translator
    from keras_attention.decoding.uncached import UncachedDecoder

# Public name -> the module of this package that defines it.
_LAZY = {
    "DecodeResult": "common",
    "Translation": "translator",
    "Translator": "translator",
    "UncachedDecoder": "uncached",
    "beam_search": "beam",
    "greedy_decode": "greedy",
    "length_penalty_factor": "beam",
    "sample": "sampling",
    "top_k_filter": "sampling",
    "top_p_filter": "sampling",
}

__all__ = [
    "DecodeResult",
    "DecodingOptions",
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


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY})
