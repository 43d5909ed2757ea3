"""Corpora, sub-word tokenizers and tf.data pipelines for translation.

Loaders return `tf.data.Dataset`s of `(source, target)` sentence pairs:
`load_multi30k`, `load_dates` (generated, offline), `load_parallel_files`,
`load_tsv`, `load_wmt14` and `load_tfds_translation`. Files are streamed
line by line (`streaming`, `base.corpus_files`): memory does not grow with the corpus. `SubwordTokenizer` (WordPiece, in
graph) turns text into ids and back; `make_translation_dataset` makes the
`((source_ids, target_in), target_out)` batches that `model.fit` takes.

The TFDS builder `multi30k_task1` is registered by importing
`keras_attention.data.multi30k_tfds` (done by `load_tfds_translation`).
"""

from keras_attention.data.bucketing import auto_bucket_boundaries, min_padding_boundaries, padding_fraction
from keras_attention.base.corpus_files import count_lines, expand_files
from keras_attention.data.dates import generate_dates, load_dates
from keras_attention.data.multi30k import load_multi30k
from keras_attention.data.parallel import load_parallel_files, load_tfds_translation, load_tsv
from keras_attention.data.pipeline import LengthStats, make_translation_dataset
from keras_attention.data.prepared import PreparedCorpus, is_prepared
from keras_attention.data.records import write_prepared_corpus
from keras_attention.data.streaming import CorpusError, CorpusReport, corpus_error
from keras_attention.data.text_files import read_lines, read_parallel_lines
from keras_attention.data.tokenizers import SubwordTokenizer
from keras_attention.data.vocabulary import (
    END,
    PAD,
    RESERVED_TOKENS,
    START,
    UNK,
    build_vocabulary,
    normalize_text,
)
from keras_attention.data.wmt14 import load_wmt14

__all__ = [
    "CorpusError",
    "CorpusReport",
    "PreparedCorpus",
    "corpus_error",
    "count_lines",
    "expand_files",
    "is_prepared",
    "write_prepared_corpus",
    "END",
    "PAD",
    "RESERVED_TOKENS",
    "START",
    "UNK",
    "LengthStats",
    "SubwordTokenizer",
    "auto_bucket_boundaries",
    "build_vocabulary",
    "generate_dates",
    "load_dates",
    "load_multi30k",
    "load_parallel_files",
    "load_tfds_translation",
    "load_tsv",
    "load_wmt14",
    "make_translation_dataset",
    "min_padding_boundaries",
    "normalize_text",
    "padding_fraction",
    "read_lines",
    "read_parallel_lines",
]
