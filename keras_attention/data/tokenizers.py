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

import tensorflow as tf
import tensorflow_text as tf_text

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
from keras_attention.layers.validation import check_choice, check_positive_int


class SubwordTokenizer(tf.Module):
    """A WordPiece tokenizer over a fixed vocabulary, usable inside `tf.function`.

    The vocabulary lives in a `tf.lookup.StaticHashTable` built from the token
    list, so a SavedModel that holds the tokenizer (as an attribute of a
    `tf.Module` it saves) carries the vocabulary with it and needs only
    TensorFlow and TensorFlow Text ops. For `.keras` files, store
    `get_config()` (which includes the vocabulary) in the model's config.

    Args:
        vocabulary: list of str. The tokens, id = position. Must start with
            `[PAD]` (id 0) and contain `[UNK]`, `[START]` and `[END]`.
        lower_case: bool. Lower-case text before tokenizing. Defaults to False.
        normalization: str or None. Unicode normal form applied first, one of
            `"NFC"`, `"NFKC"`, `"NFD"`, `"NFKD"` or None. Defaults to `"NFKC"`.
        max_bytes_per_word: int. Longer words become `[UNK]`. Defaults to 200.
        name: str. Module name. Defaults to None.

    Example:

    >>> tok = SubwordTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog",
    ...                         "##.", "##s"])
    >>> tok.tokenize(["a dogs."]).to_list()
    [[4, 5, 7, 6]]
    >>> tok.detokenize([[2, 4, 5, 7, 6, 3, 0]]).numpy()
    array([b'a dogs.'], dtype=object)
    """

    def __init__(
        self, vocabulary, lower_case=False, normalization="NFKC", max_bytes_per_word=200, name=None
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
        self._tokens = tf.constant(vocabulary, dtype=tf.string)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._tokens, tf.range(len(vocabulary), dtype=tf.int64)
            ),
            default_value=self.unk_id,
        )
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
        tokens = tf.gather(self._tokens, tf.ragged.boolean_mask(ids, keep))
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        text = tf.strings.regex_replace(text, " " + SUFFIX, "")
        return tf.strings.regex_replace(text, "^" + SUFFIX, "")

    def id_to_token(self, ids):
        """Token strings of int `ids` (any shape); out-of-range ids give `[UNK]`."""
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        ids = tf.where((ids < 0) | (ids >= self.vocab_size), self.unk_id, ids)
        return tf.gather(self._tokens, ids)

    def token_to_id(self, tokens):
        """int32 ids of token strings (any shape); unknown tokens give `unk_id`."""
        return tf.cast(self.table.lookup(tf.convert_to_tensor(tokens, tf.string)), tf.int32)

    def save_vocabulary(self, path):
        """Write the vocabulary to `path`, one token a line (UTF-8)."""
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(token + "\n" for token in self._vocabulary)

    @classmethod
    def from_vocabulary_file(cls, path, **kwargs):
        """Make a tokenizer from a file written by `save_vocabulary`.

        Args:
            path: str. The vocabulary file.
            **kwargs: the other constructor arguments (`lower_case`,
                `normalization`, ...): pass the ones the vocabulary was built
                with, as they are not stored in the file.
        """
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

        `lower_case` and `normalization` in `kwargs` go to both.
        """
        options = {k: kwargs.pop(k) for k in ("lower_case", "normalization") if k in kwargs}
        vocabulary = build_vocabulary(dataset, vocab_size, reserved_tokens, **options)
        return cls(vocabulary, **options, **kwargs)
