"""WordPiece sub-word tokenizers that run inside the TensorFlow graph.

Text is normalised (Unicode normal form, optional lower-casing, whitespace
collapsed to single spaces), split on whitespace only, and each word is cut
into the longest vocabulary pieces from the left (WordPiece; Wu et al., 2016,
https://arxiv.org/abs/1609.08144); pieces inside a word carry the `##` prefix.
Punctuation is not split off before WordPiece, so "dog." becomes `dog ##.`
and detokenizing (join with spaces, remove " ##") gives back the normalised
text exactly. Every character of the training text, alone and with `##`, is in
the vocabulary, so only words with unseen characters become `[UNK]`.
"""

import os

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attention.base.files import write_text
from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.data.text_files import read_lines
from keras_attention.data.vocabulary import (
    END,
    NORMALIZATIONS,
    RESERVED_TOKENS,
    START,
    SUFFIX,
    UNK,
    build_vocabulary,
    check_vocabulary,
    normalize_text,
)

_WHOLE_LINE = tf.lookup.TextFileIndex.WHOLE_LINE
_LINE_NUMBER = tf.lookup.TextFileIndex.LINE_NUMBER


class SubwordTokenizer(tf.Module):
    """A WordPiece tokenizer over a fixed vocabulary, usable inside `tf.function`.

    The vocabulary lives in `tf.lookup.StaticHashTable`s (token -> id for
    WordPiece, id -> token for detokenizing), so a SavedModel that holds the
    tokenizer (as an attribute of a `tf.Module` it saves) carries the
    vocabulary with it and needs only TensorFlow and TensorFlow Text ops. By
    default the tables are built from the token list (graph constants); with
    `vocabulary_file` they are read from that file instead
    (`tf.lookup.TextFileInitializer`), and a SavedModel stores the file as an
    asset, as TF Serving expects. For `.keras` files, store `get_config()`
    (which includes the vocabulary) in the model's config.

    Args:
        vocabulary: list of str. The tokens, id = position. Must start with
            `[PAD]` (id 0) and contain `[UNK]`, `[START]` and `[END]`.
        lower_case: bool. Lower-case text before tokenizing. Defaults to False.
        normalization: str or None. Unicode normal form applied first, one of
            `"NFC"`, `"NFKC"`, `"NFD"`, `"NFKD"` or None. Defaults to `"NFKC"`.
        max_bytes_per_word: int. Longer words become `[UNK]`. Defaults to 200.
        name: str. Module name. Defaults to None.
        vocabulary_file: str or None. A file holding `vocabulary` exactly as
            `save_vocabulary` writes it, to build the lookup tables from.
            Defaults to None (tables built from constants).

    Example:

    >>> tok = SubwordTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog",
    ...                         "##.", "##s"])
    >>> tok.tokenize(["a dogs."]).to_list()
    [[4, 5, 7, 6]]
    >>> tok.detokenize([[2, 4, 5, 7, 6, 3, 0]]).numpy()
    array([b'a dogs.'], dtype=object)
    """

    def __init__(
        self,
        vocabulary,
        lower_case=False,
        normalization="NFKC",
        max_bytes_per_word=200,
        name=None,
        vocabulary_file=None,
    ):
        super().__init__(name=name)
        vocabulary = [str(t) for t in vocabulary]
        check_vocabulary(vocabulary)
        check_choice("normalization", normalization, NORMALIZATIONS)
        self._vocabulary = tuple(vocabulary)
        self.lower_case = bool(lower_case)
        self.normalization = normalization
        self.max_bytes_per_word = check_positive_int("max_bytes_per_word", max_bytes_per_word)
        self.pad_id = 0
        self.unk_id = vocabulary.index(UNK)
        self.start_id = vocabulary.index(START)
        self.end_id = vocabulary.index(END)
        if vocabulary_file is None:
            self._tokens = tf.constant(vocabulary, dtype=tf.string)
            ids = tf.range(len(vocabulary), dtype=tf.int64)
            to_id = tf.lookup.KeyValueTensorInitializer(self._tokens, ids)
            self.id_table = None
        else:
            _check_vocabulary_file(vocabulary_file, vocabulary)
            self._tokens = None
            lines = dict(filename=vocabulary_file, vocab_size=len(vocabulary))
            to_id = tf.lookup.TextFileInitializer(
                key_dtype=tf.string, key_index=_WHOLE_LINE,
                value_dtype=tf.int64, value_index=_LINE_NUMBER, **lines,
            )
            to_token = tf.lookup.TextFileInitializer(
                key_dtype=tf.int64, key_index=_LINE_NUMBER,
                value_dtype=tf.string, value_index=_WHOLE_LINE, **lines,
            )
            self.id_table = tf.lookup.StaticHashTable(to_token, default_value=UNK)
        self.table = tf.lookup.StaticHashTable(to_id, default_value=self.unk_id)
        longest = max(len(t[len(SUFFIX) :] if t.startswith(SUFFIX) else t) for t in vocabulary)
        self.wordpiece = tf_text.WordpieceTokenizer(
            self.table,
            suffix_indicator=SUFFIX,
            max_bytes_per_word=self.max_bytes_per_word,
            max_chars_per_token=longest,
            token_out_type=tf.int32,
            unknown_token=UNK,
        )

    @property
    def vocab_size(self):
        """Number of tokens, including the reserved ones."""
        return len(self._vocabulary)

    @property
    def vocabulary(self):
        """The tokens as a list of str, id = position."""
        return list(self._vocabulary)

    def normalize(self, strings):
        """Normalise text as `tokenize` sees it (in graph); see `normalize_text`.

        Args:
            strings: string tensor of any shape.

        Returns:
            A string tensor of the same shape.
        """
        return normalize_text(strings, self.lower_case, self.normalization)

    def split_words(self, strings):
        """Normalise and split on whitespace: `(...)` strings -> `(..., words)`."""
        return tf.strings.split(self.normalize(strings))

    def tokenize(self, strings):
        """Strings to token ids (no start/end tokens added).

        Args:
            strings: a string scalar or a `(batch,)` string tensor (or a Python
                str / list of str).

        Returns:
            int32 ids: a 1-D tensor for a scalar input, a `(batch, None)`
            `tf.RaggedTensor` for a batch.
        """
        pieces = self.wordpiece.tokenize(self.split_words(strings))  # (..., words, pieces)
        return pieces.merge_dims(-2, -1)  # (..., pieces)

    def detokenize(self, ids):
        """Token ids back to text.

        `[PAD]` and `[START]` are dropped, and so is everything from the first
        `[END]` on; pieces are joined with spaces and `" ##"` is removed.
        Out-of-range ids read as `[UNK]`.

        Args:
            ids: int ids `(length,)` or `(batch, length)`, dense or ragged.

        Returns:
            A string scalar, or a `(batch,)` string tensor.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=self.pad_id)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        ids = tf.where((ids < 0) | (ids >= self.vocab_size), self.unk_id, ids)
        after_end = tf.cumsum(tf.cast(ids == self.end_id, tf.int32), axis=-1) > 0
        keep = ~after_end & (ids != self.pad_id) & (ids != self.start_id)
        tokens = self._lookup_tokens(tf.ragged.boolean_mask(ids, keep))
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        text = tf.strings.regex_replace(text, " " + SUFFIX, "")
        return tf.strings.regex_replace(text, "^" + SUFFIX, "")

    def id_to_token(self, ids):
        """Token strings of int `ids` (any shape, dense or ragged); out-of-range ids give `[UNK]`."""
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.id_to_token(ids.flat_values))
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        ids = tf.where((ids < 0) | (ids >= self.vocab_size), self.unk_id, ids)
        return self._lookup_tokens(ids)

    def _lookup_tokens(self, ids):
        """Token strings of in-range int32 `ids` (dense or ragged)."""
        if self._tokens is not None:
            return tf.gather(self._tokens, ids)
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self._lookup_tokens(ids.flat_values))
        return self.id_table.lookup(tf.cast(ids, tf.int64))

    def token_to_id(self, tokens):
        """int32 ids of token strings (any shape); unknown tokens give `unk_id`."""
        return tf.cast(self.table.lookup(tf.convert_to_tensor(tokens, tf.string)), tf.int32)

    def save_vocabulary(self, path):
        """Write the vocabulary to `path`, one token a line (UTF-8), atomically."""
        write_text(path, "".join(token + "\n" for token in self._vocabulary))

    @classmethod
    def from_vocabulary_file(cls, path, tables_from_file=False, **kwargs):
        """Make a tokenizer from a file written by `save_vocabulary`.

        Args:
            path: str. The vocabulary file.
            tables_from_file: bool. Build the lookup tables from the file
                itself (`vocabulary_file=path`), so that a SavedModel holding
                the tokenizer stores the file as an asset. Defaults to False.
            **kwargs: the other constructor arguments (`lower_case`,
                `normalization`, ...): pass the ones the vocabulary was built
                with, as they are not stored in the file.
        """
        if tables_from_file:
            kwargs["vocabulary_file"] = os.fspath(path)
        return cls(read_lines(path), **kwargs)

    def get_config(self):
        """A JSON-able dict (vocabulary included) that `from_config` accepts."""
        return {
            "vocabulary": list(self._vocabulary),
            "lower_case": self.lower_case,
            "normalization": self.normalization,
            "max_bytes_per_word": self.max_bytes_per_word,
        }

    @classmethod
    def from_config(cls, config):
        """Rebuild a tokenizer from `get_config()`."""
        return cls(**config)

    @classmethod
    def from_dataset(cls, dataset, vocab_size, reserved_tokens=RESERVED_TOKENS, **kwargs):
        """Build a vocabulary with `build_vocabulary` and return its tokenizer.

        `lower_case` and `normalization` in `kwargs` go to both;
        `max_sentences` and `total` (the bounded sample) to `build_vocabulary`.
        """
        keys = ("lower_case", "normalization", "max_sentences", "total")
        options = {k: kwargs.pop(k) for k in keys if k in kwargs}
        vocabulary = build_vocabulary(dataset, vocab_size, reserved_tokens, **options)
        options.pop("max_sentences", None), options.pop("total", None)
        return cls(vocabulary, **options, **kwargs)


def _check_vocabulary_file(path, vocabulary):
    """Raise ValueError unless `path` holds `vocabulary` as `save_vocabulary` writes it
    (TensorFlow's file initializer reads raw lines: no BOM, `\\r` or gzip)."""
    with open(path, "rb") as f:
        if f.read() != "".join(token + "\n" for token in vocabulary).encode("utf-8"):
            raise ValueError(
                "`vocabulary_file` must hold `vocabulary`, one token a line, exactly as "
                "`SubwordTokenizer.save_vocabulary` writes it (UTF-8, '\\n' line ends, no BOM). "
                f"Received: vocabulary_file={os.fspath(path)!r}"
            )
