"""Parallel text read line by line with `tf.data`: shards, globs, gzip; checked, cleaned, counted.

Nothing here holds a corpus in memory. Before any text is read, the lines of
every source/target shard pair are counted (newlines, in 1 MiB chunks) and
compared, so a misaligned pair of files is an error naming both files and both
counts. Then each shard is read with `tf.data.TextLineDataset` and checked in
batches of lines, inside the graph:

- a line that is not valid UTF-8 (`not_utf8`),
- an empty or whitespace-only side (`empty`),
- a TSV line with too few columns (`malformed`),
- more than `max_words` whitespace-separated words on a side (`too_long`),
- a word-count ratio between the sides above `max_ratio` (`bad_ratio`), as
  Moses' `clean-corpus-n.perl` does,

are skipped and counted in a `CorpusReport` (by default), or stop the pipeline
with an error naming the file and the 1-based line (`strict=True`).

Exact duplicate pairs are not removed: that needs memory (or a sort) that
grows with the corpus. Remove them beforehand if you need to, for example with
`paste src tgt | sort -u`.
"""

import re

import tensorflow as tf

from keras_attention.base.corpus_files import check_alignment, count_lines, expand_files, is_gzip

_BATCH = 1024
# What a strict-mode failure says, so that it can be found in TensorFlow's error text.
_ERROR_MARK = "Corpus error: "
REASONS = {
    "not_utf8": "not valid UTF-8",
    "empty": "an empty side",
    "malformed": "too few tab-separated columns",
    "too_long": "more words than max_words",
    "bad_ratio": "a word-count ratio above max_ratio",
    "too_long_tokens": "more tokens than the maximum length",
}


class CorpusError(ValueError):
    """A problem in a corpus file (the message names the file and line)."""


class CorpusReport:
    """Counts of the lines a streamed corpus read, kept and skipped, and why.

    The counters are `tf.Variable`s that the pipeline adds to as it runs, so
    they hold what has been read so far: after one full pass, the whole
    corpus. Create a report outside any `tf.distribute` strategy scope.

    Attributes:
        lines: int or None. The number of lines (pairs) the files hold, from
            the line-count check, before anything is read.
        files: list of `(source, target)` paths (TSV: `(path, path)`).

    Example:

    >>> report = CorpusReport()  # doctest: +SKIP
    >>> pairs = load_parallel_files("c.en", "c.de", report=report)  # doctest: +SKIP
    >>> _ = sum(1 for _ in pairs); print(report)  # doctest: +SKIP
    read 10 pairs, kept 9; skipped 1: 1 with an empty side
    """

    KEYS = ("read", "kept", *REASONS)

    def __init__(self):
        self.lines = None
        self.files = []
        with tf.init_scope():
            self._counters = {
                key: tf.Variable(0, dtype=tf.int64, trainable=False, name=f"corpus_{key}")
                for key in self.KEYS
            }

    def add(self, key, amount):
        """In graph: add `amount` to counter `key` (an op)."""
        return self._counters[key].assign_add(tf.cast(amount, tf.int64))

    def counts(self):
        """A dict of Python ints: `read`, `kept` and one entry per skip reason."""
        return {key: int(variable.numpy()) for key, variable in self._counters.items()}

    def reset(self):
        """Set every counter to 0 (before the pass to be counted)."""
        for variable in self._counters.values():
            variable.assign(0)

    def to_dict(self):
        """What a run's results record: the counts and the line total."""
        return {"lines": self.lines, **self.counts()}

    def __str__(self):
        counts = self.counts()
        skipped = {k: counts[k] for k in REASONS if counts[k]}
        text = f"read {counts['read']:,} pairs, kept {counts['kept']:,}"
        if not skipped:
            return text + "; none skipped"
        with_reason = ("empty", "bad_ratio", "too_long", "too_long_tokens", "malformed")
        parts = ", ".join(f"{n:,} with {REASONS[k]}" if k in with_reason else f"{n:,} {REASONS[k]}"
                          for k, n in skipped.items())
        return f"{text}; skipped {sum(skipped.values()):,}: {parts}"


def read_parallel_text(
    source_files,
    target_files,
    *,
    strict=False,
    skip_empty=True,
    max_words=None,
    max_ratio=None,
    report=None,
    with_locations=False,
    check_counts=True,
):
    """Stream aligned source/target shards as a dataset of checked sentence pairs.

    Args:
        source_files: a path, a glob pattern, or a list of them (shards, read
            in the order given; gzip detected from the content).
        target_files: the same for the target side, shard for shard.
        strict: bool. Stop at the first bad line with an error naming the file
            and line, instead of skipping and counting it. Defaults to False.
        skip_empty: bool. With False, an empty side is an error even when
            `strict` is off. Defaults to True.
        max_words: int or None. Skip pairs with more whitespace-separated words
            on either side. Defaults to None (no limit).
        max_ratio: float or None. Skip pairs whose longer side has more than
            `max_ratio` times the words of the shorter. Defaults to None.
        report: a `CorpusReport` to count into, or None. Its `lines` and
            `files` are set here.
        with_locations: bool. Add a third element, `"FILE line N"`, to each
            pair (for errors further down the pipeline). Defaults to False.
        check_counts: bool. Compare the shards' line counts first. Defaults
            to True.

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars (with a
        location string if `with_locations`), in file order.
    """
    sources = expand_files(source_files, "source files")
    targets = expand_files(target_files, "target files")
    counts = check_alignment(sources, targets) if check_counts else None
    _check_cleaning(max_words, max_ratio)
    if report is not None:
        report.lines = sum(counts) if counts else None
        report.files = list(zip(sources, targets))
    source_table, target_table = tf.constant(sources), tf.constant(targets)
    source_gzip = tf.constant(["GZIP" if is_gzip(p) else "" for p in sources])
    target_gzip = tf.constant(["GZIP" if is_gzip(p) else "" for p in targets])

    def shard(index):  # lines of one shard pair, with the shard index and line number
        lines = tf.data.Dataset.zip((
            tf.data.TextLineDataset(source_table[index], source_gzip[index]),
            tf.data.TextLineDataset(target_table[index], target_gzip[index]),
            tf.data.Dataset.counter(1),
        ))
        return lines.map(lambda s, t, n: (s, t, index, n))

    lines = tf.data.Dataset.range(len(sources)).flat_map(shard)
    check = _checker(source_table, strict, skip_empty, max_words, max_ratio, report, with_locations,
                     target_table)
    pairs = lines.batch(_BATCH).map(check, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    if strict and counts:  # nothing is skipped (a bad line is an error): the length is known
        pairs = pairs.apply(tf.data.experimental.assert_cardinality(sum(counts)))
    return pairs


def read_tsv_text(
    files,
    source_column=0,
    target_column=1,
    *,
    strict=False,
    skip_empty=True,
    max_words=None,
    max_ratio=None,
    report=None,
    with_locations=False,
):
    """Stream tab-separated pairs; the options and result are those of `read_parallel_text`.

    A line with fewer columns than `max(source_column, target_column) + 1` is
    `malformed`. Lines may have more columns (Tatoeba's third column is an
    attribution).
    """
    for name, value in (("source_column", source_column), ("target_column", target_column)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"`{name}` must be an int >= 0. Received: {name}={value!r}")
    if source_column == target_column:
        raise ValueError(
            "`source_column` and `target_column` must differ. "
            f"Received: source_column={source_column}, target_column={target_column}"
        )
    paths = expand_files(files, "TSV files")
    _check_cleaning(max_words, max_ratio)
    counts = [count_lines(p) for p in paths]
    if not sum(counts):
        raise ValueError(f"{paths[0]}: the file is empty (no text lines).")
    if report is not None:
        report.lines, report.files = sum(counts), [(p, p) for p in paths]
    table = tf.constant(paths)
    compression = tf.constant(["GZIP" if is_gzip(p) else "" for p in paths])
    needed = max(source_column, target_column) + 1

    def shard(index):
        lines = tf.data.Dataset.zip((tf.data.TextLineDataset(table[index], compression[index]),
                                     tf.data.Dataset.counter(1)))
        return lines.map(lambda line, n: (line, index, n))

    def split(lines, index, number):  # (B,) lines -> the two columns, and which lines lack them
        fields = tf.strings.split(lines, "\t")  # (B, None)
        padded = fields.to_tensor(default_value="", shape=[None, needed])
        malformed = fields.row_lengths() < needed
        return padded[:, source_column], padded[:, target_column], index, number, malformed

    check = _checker(table, strict, skip_empty, max_words, max_ratio, report, with_locations)
    lines = tf.data.Dataset.range(len(paths)).flat_map(shard).batch(_BATCH).map(split)
    return lines.map(check, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def _checker(files, strict, skip_empty, max_words, max_ratio, report, with_locations, target_files=None):
    """The batched check: `(B,)` lines in, the kept pairs out, counts and errors as set.

    Errors name the source file, or the target file when only the target
    side of the line is bad (`target_files`: the target shards' names).
    """

    @tf.autograph.experimental.do_not_convert  # graph ops only: AutoGraph's conversion would only slow tracing
    def check(source, target, index, number, malformed=None):
        bad = {}
        source_ok = tf.equal(_valid_utf8(source), source)
        target_ok = tf.equal(_valid_utf8(target), target)
        bad["not_utf8"] = ~(source_ok & target_ok)
        if malformed is not None:
            bad["malformed"] = malformed & ~bad["not_utf8"]
        source, target = _strip_bom(source), _strip_bom(target)
        empty = (tf.strings.length(tf.strings.strip(source)) == 0) | (
            tf.strings.length(tf.strings.strip(target)) == 0)
        seen = bad["not_utf8"] | bad.get("malformed", False)
        bad["empty"] = empty & ~seen
        seen |= bad["empty"]
        source_words = tf.strings.split(source).row_lengths()
        target_words = tf.strings.split(target).row_lengths()
        if max_words is not None:
            bad["too_long"] = ((source_words > max_words) | (target_words > max_words)) & ~seen
            seen |= bad["too_long"]
        if max_ratio is not None:
            longer = tf.cast(tf.maximum(source_words, target_words), tf.float64)
            shorter = tf.cast(tf.maximum(tf.minimum(source_words, target_words), 1), tf.float64)
            bad["bad_ratio"] = (longer > max_ratio * shorter) & ~seen
            seen |= bad["bad_ratio"]
        line = tf.strings.as_string(number)
        location = tf.strings.join([tf.gather(files, index), " line ", line])
        blame_target = tf.zeros_like(seen)
        if target_files is not None:
            source_bad = ~source_ok | (tf.strings.length(tf.strings.strip(source)) == 0)
            blame_target = ~source_bad
            target_location = tf.strings.join([tf.gather(target_files, index), " line ", line])
        updates = []
        for reason, mask in bad.items():
            if strict or (reason == "empty" and not skip_empty):
                where = location
                if target_files is not None and reason in ("not_utf8", "empty"):
                    where = tf.where(blame_target, target_location, location)
                updates.append(_assert_none(mask, where, reason))
            if report is not None:
                updates.append(report.add(reason, tf.reduce_sum(tf.cast(mask, tf.int64))))
        if report is not None:
            updates.append(report.add("read", tf.size(source, out_type=tf.int64)))
            skipped = tf.reduce_sum(tf.cast(seen, tf.int64))
            updates.append(report.add("kept", tf.size(source, out_type=tf.int64) - skipped))
        with tf.control_dependencies(updates):
            keep = tf.identity(~seen)
        kept = (tf.boolean_mask(source, keep), tf.boolean_mask(target, keep))
        return (*kept, tf.boolean_mask(location, keep)) if with_locations else kept

    return check


def _assert_none(mask, location, reason):
    """An op that fails, naming the first line where `mask` is set, if it is set anywhere."""
    first = tf.gather(location, tf.argmax(tf.cast(mask, tf.int32)))
    message = tf.strings.join([_ERROR_MARK, first, ": ", REASONS[reason]])
    return tf.debugging.Assert(~tf.reduce_any(mask), [message], summarize=1)


def assert_token_lengths(mask, location, what):
    """For pipelines: an op failing at the first location where `mask` is set (`what` says why)."""
    first = tf.gather(location, tf.argmax(tf.cast(mask, tf.int32)))
    message = tf.strings.join([_ERROR_MARK, first, ": ", what])
    return tf.debugging.Assert(~tf.reduce_any(mask), [message], summarize=1)


def _valid_utf8(strings):
    """`strings` with each invalid UTF-8 sequence replaced (valid text is unchanged)."""
    return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace")


def _strip_bom(strings):
    return tf.strings.regex_replace(strings, "^\ufeff", "")


def _check_cleaning(max_words, max_ratio):
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int)
                                  or max_words < 1):
        raise ValueError(f"`max_words` must be None or an int >= 1. Received: max_words={max_words!r}")
    if max_ratio is not None and (isinstance(max_ratio, bool) or not isinstance(max_ratio, (int, float))
                                  or not max_ratio >= 1):
        raise ValueError(f"`max_ratio` must be None or a number >= 1. Received: max_ratio={max_ratio!r}")


def corpus_error(error):
    """The one-line `CorpusError` inside a TensorFlow error raised by a strict pipeline, or None."""
    text = getattr(error, "message", None) or str(error)
    match = re.search(re.escape(_ERROR_MARK) + r"(.*?)(?:\]|\n|$)", text)
    return CorpusError(match.group(1).strip()) if match else None
