"""Text normalisation and WordPiece vocabulary learning for `SubwordTokenizer`.

The vocabulary is learned with TensorFlow Text's WordPiece learner
(`wordpiece_tokenizer_learner_lib.learn_with_thresh`: every piece seen at
least `t` times, longest first), with our own search for the threshold `t`
(a guess from the word counts, then bisection) because the library's search
over the whole count range is slow in Python. Afterwards every character of
the text, alone and as `##c`, is guaranteed a place.
"""

import collections
import math
import time
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.data.text_files import logger

PAD = "[PAD]"
"""The padding token, id 0 in every vocabulary."""
UNK = "[UNK]"
"""The token of pieces outside the vocabulary (id 1 in vocabularies `build_vocabulary` makes)."""
START = "[START]"
"""The token that begins every sequence (id 2 in vocabularies `build_vocabulary` makes)."""
END = "[END]"
"""The token that ends every sequence (id 3 in vocabularies `build_vocabulary` makes)."""
RESERVED_TOKENS = (PAD, UNK, START, END)
"""The tokens every vocabulary starts with, in this order (ids 0-3)."""
NORMALIZATIONS = (None, "NFC", "NFKC", "NFD", "NFKD")
SUFFIX = "##"
# Python's str.split() whitespace, in RE2 syntax.
_WHITESPACE = r"[\s\x{0b}\x{1c}-\x{1f}\x{85}\p{Z}]+"
_MAX_PIECE_CHARS = 50


def normalize_text(strings, lower_case=False, normalization="NFKC"):
    """Normalise text in graph, as the tokenizer sees it.

    Bytes that are not valid UTF-8 become U+FFFD first (as Python's
    `bytes.decode("utf-8", "replace")` does), so any input gives valid text.
    Then the Unicode normal form, lower-casing if on, and each run of
    whitespace becomes one space, leading and trailing spaces removed; the
    same as `" ".join(unicodedata.normalize(form, s).lower().split())` in Python.

    Args:
        strings: string tensor of any shape.
        lower_case: bool. Defaults to False.
        normalization: one of `NORMALIZATIONS`. Defaults to `"NFKC"`.

    Returns:
        A string tensor of the same shape.
    """
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    strings = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace")
    if normalization:
        strings = tf_text.normalize_utf8(strings, normalization)
    if lower_case:
        strings = tf.strings.lower(strings, encoding="utf-8")
    strings = tf.strings.regex_replace(strings, _WHITESPACE, " ")
    return tf.strings.strip(strings)


MAX_SENTENCES = 1_000_000


def build_vocabulary(
    dataset,
    vocab_size,
    reserved_tokens=RESERVED_TOKENS,
    lower_case=False,
    normalization="NFKC",
    max_sentences=MAX_SENTENCES,
    total=None,
):
    """Learn a WordPiece vocabulary of at most `vocab_size` tokens from text.

    Words (text split on whitespace after normalisation) are counted with
    their trailing punctuation cut off, since the tokenizer splits "dog." into
    `dog ##.` anyway. The most frequent pieces fill the room left after the
    reserved tokens and every character of the text alone and as `##c`.

    Args:
        dataset: a `tf.data.Dataset` of string scalars or string vectors, or a
            list of str.
        vocab_size: int. Maximum number of tokens, reserved ones included. The
            result is smaller when the text has fewer pieces seen twice.
        reserved_tokens: sequence of str. Tokens placed first, in this order;
            must start with `[PAD]` and contain `[UNK]`, `[START]`, `[END]`.
            Defaults to `RESERVED_TOKENS`.
        lower_case: bool. Lower-case the text. Defaults to False.
        normalization: str or None. Unicode normal form, one of
            `NORMALIZATIONS`. Defaults to `"NFKC"`.
        max_sentences: int or None. Learn from at most this many sentences,
            spread evenly over the text (every k-th), so that time and memory
            are bounded whatever the corpus size. None reads everything.
            Defaults to 1,000,000.
        total: int or None. How many sentences `dataset` holds, when its
            cardinality is unknown (a streamed file: the line count). Without
            it a longer stream is sampled from its head. Defaults to None.

    Returns:
        The vocabulary, a list of str.

    Raises:
        ValueError: `vocab_size` is smaller than the reserved tokens or than
            what the text's characters need; bad `reserved_tokens`; no text.

    Example:

    >>> vocab = build_vocabulary(["a dog runs.", "two dogs run."], vocab_size=100)
    >>> vocab[:4] == [PAD, UNK, START, END]  # the reserved tokens first
    True
    """
    check_positive_int("vocab_size", vocab_size)
    check_choice("normalization", normalization, NORMALIZATIONS)
    reserved_tokens = [str(t) for t in reserved_tokens]
    check_vocabulary(reserved_tokens, name="reserved_tokens")
    if vocab_size < len(reserved_tokens):
        raise ValueError(
            f"`vocab_size` must be at least the number of reserved tokens "
            f"({len(reserved_tokens)}: {reserved_tokens}). Received: vocab_size={vocab_size}"
        )
    started = time.perf_counter()
    dataset = _as_dataset(dataset)
    if max_sentences is not None:
        dataset = spread_sample(dataset, check_positive_int("max_sentences", max_sentences), total)
    words = _count_words(dataset, lower_case, normalization)
    if not words:
        raise ValueError("`dataset` holds no words to build a vocabulary from.")
    chars = sorted({c for word in words for c in word})
    base = list(reserved_tokens)
    base += [t for t in chars + [SUFFIX + c for c in chars] if t not in reserved_tokens]
    if len(base) > vocab_size:
        raise ValueError(
            f"`vocab_size` is too small: the text has {len(chars)} distinct characters, so "
            f"the reserved tokens and every character alone and with '{SUFFIX}' need "
            f"{len(base)} tokens. Received: vocab_size={vocab_size}"
        )
    seen = set(base)
    pieces = _learn_pieces(_stem_counts(words), vocab_size, reserved_tokens)
    vocabulary = base + [t for t in pieces if t not in seen][: vocab_size - len(base)]
    logger.info(
        "Built a vocabulary of %d tokens (%d characters) from %d distinct words in %.1f s.",
        len(vocabulary),
        len(chars),
        len(words),
        time.perf_counter() - started,
    )
    return vocabulary


def spread_sample(dataset, max_elements, total=None):
    """At most `max_elements` elements of `dataset`, every k-th one, spread over all of it.

    Args:
        dataset: a `tf.data.Dataset`.
        max_elements: int. The sample's largest size.
        total: int or None. The dataset's length if its cardinality is
            unknown (for example a file's line count). If neither is known,
            the first `max_elements` elements are taken, with a log line.

    Returns:
        A `tf.data.Dataset`: elements 0, k, 2k, ... with k = ceil(total /
        max_elements), or the whole dataset when it is small enough.
    """
    if total is None and int(dataset.cardinality()) >= 0:
        total = int(dataset.cardinality())
    if total is None:
        logger.info("Sampling the first %d elements of a stream of unknown length.", max_elements)
        return dataset.take(max_elements)
    if total <= max_elements:
        return dataset
    step = -(-total // max_elements)  # ceil
    every_kth = dataset.enumerate().filter(lambda i, x: i % step == 0)
    return every_kth.map(lambda i, x: x).take(max_elements)


def _as_dataset(dataset):
    if isinstance(dataset, tf.data.Dataset):
        return dataset
    return tf.data.Dataset.from_tensor_slices(tf.constant(list(dataset), tf.string))


def _count_words(dataset, lower_case, normalization):
    """Counter of normalised words (str) in `dataset`."""
    spec = dataset.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
        raise ValueError(
            "`dataset` must hold string tensors (use `pairs.map(lambda s, t: s)` to "
            f"pick one side of a pair dataset). Received: element_spec={spec}"
        )
    if spec.shape.rank == 0:
        dataset = dataset.batch(4096)

    @tf.autograph.experimental.do_not_convert  # graph ops only: AutoGraph's conversion would only slow tracing
    def split(strings):
        text = normalize_text(tf.reshape(strings, [-1]), lower_case, normalization)
        return tf.strings.split(text).flat_values

    counts = collections.Counter()
    for batch in dataset.map(split).prefetch(2).as_numpy_iterator():
        counts.update(batch.tolist())
    return collections.Counter({w.decode("utf-8"): n for w, n in counts.items()})


def _stem_counts(words):
    """Counts with trailing punctuation cut off each word (kept if all punctuation)."""
    stems = collections.Counter()
    for word, count in words.items():
        stem = word
        while stem and unicodedata.category(stem[-1]).startswith("P"):
            stem = stem[:-1]
        stems[stem or word] += count
    return stems


def _learn_pieces(counts, vocab_size, reserved_tokens):
    """Pieces, most frequent first, from the lowest count threshold that gives
    at least `vocab_size` tokens (or from threshold 2 if none does)."""
    counts = sorted(
        ((w, n) for w, n in counts.items() if len(w) <= _MAX_PIECE_CHARS), key=lambda x: -x[1]
    )
    params = learner.Params(
        upper_thresh=None,
        lower_thresh=None,
        num_iterations=4,
        max_input_tokens=-1,
        max_token_length=_MAX_PIECE_CHARS,
        max_unique_chars=-1,
        vocab_size=vocab_size,
        slack_ratio=0.0,
        include_joiner_token=True,
        joiner=SUFFIX,
        reserved_tokens=list(reserved_tokens),
    )
    vocabularies = {}

    def size_at(t):
        if t not in vocabularies:
            vocabularies[t] = learner.learn_with_thresh(counts, t, params)
        return len(vocabularies[t])

    # A first guess: learned vocabularies hold about 1.35 tokens per word kept,
    # so start from the threshold that keeps vocab_size / 1.35 words.
    kept = int(vocab_size / 1.35)
    guess = max(2, counts[kept][1] + 1) if kept < len(counts) else 2
    # Find a threshold whose vocabulary is at least vocab_size and at most 15%
    # larger (the extra tokens, the rarest, are cut), or the largest threshold
    # with at least vocab_size tokens. Each try learns a whole vocabulary, so
    # the next one interpolates (sizes fall with the threshold about as a power
    # law) but stays in the middle of the bracket, which then shrinks however
    # flat the sizes are (a text of few distinct pieces has long plateaus).
    # Invariant: size_at(low) >= vocab_size (assumed for 1), size_at(high) < vocab_size.
    low, high, t = 1, None, guess
    while True:
        if size_at(t) >= vocab_size:
            low = t
        else:
            high = t
        if (low > 1 and size_at(low) <= 1.15 * vocab_size) or (
            high is not None and high - low <= 1
        ):
            return vocabularies[max(low, 2)]
        t = _next_threshold(low, high, size_at, vocab_size)


def _next_threshold(low, high, size_at, target, slope=-0.6):
    if high is None:  # Every size so far is large enough: raise the threshold.
        return max(low + 1, round(low * (size_at(low) / target) ** (-1 / slope)))
    if low == 1:  # Every size so far is too small: lower it.
        return max(2, min(high - 1, round(high * (size_at(high) / target) ** (-1 / slope))))
    slope = math.log(max(size_at(high), 1) / size_at(low)) / math.log(high / low)
    guess = low * (target / size_at(low)) ** (1 / slope) if slope < 0 else math.sqrt(low * high)
    # Within the bracket's middle half on a log scale: [low * r^(1/4), low * r^(3/4)], r = high / low.
    ratio = high / low
    guess = min(max(guess, low * ratio**0.25), low * ratio**0.75)
    return min(high - 1, max(low + 1, round(guess)))


def check_vocabulary(tokens, name="vocabulary"):
    """Raise ValueError unless `tokens` is a usable vocabulary (or reserved list)."""
    if not tokens or tokens[0] != PAD:
        raise ValueError(
            f"`{name}` must start with {PAD!r} (id 0, the padding id). "
            f"Received: {name}[:5]={list(tokens[:5])}"
        )
    missing = [t for t in RESERVED_TOKENS if t not in tokens]
    if missing:
        raise ValueError(f"`{name}` lacks the tokens {missing}. Received: {name}[:8]={tokens[:8]}")
    repeated = [t for t, n in collections.Counter(tokens).items() if n > 1]
    if repeated:
        raise ValueError(f"`{name}` has repeated tokens: {repeated[:10]}")
    bad = [t for t in tokens if not t or len(t.split()) != 1 or t != t.strip()]
    if bad:
        raise ValueError(f"`{name}` has empty tokens or tokens with whitespace: {bad[:10]!r}")
