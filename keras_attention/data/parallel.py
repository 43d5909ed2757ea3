"""The user's own parallel text, and translation data sets from TFDS by name."""

import difflib

import tensorflow as tf

from keras_attention.data.streaming import read_parallel_text, read_tsv_text


def load_parallel_files(
    source_path,
    target_path,
    skip_empty=True,
    *,
    strict=False,
    max_words=None,
    max_ratio=None,
    report=None,
    with_locations=False,
):
    """Stream line-aligned text files (plain or gzip, one or several shards) as sentence pairs.

    Nothing is loaded into memory: the files are read line by line with
    `tf.data` (see `keras_attention.data.streaming`). First the line counts
    of each source/target shard pair are compared (newlines counted in
    chunks); then, as the dataset is read, lines that are not UTF-8, pairs
    with an empty side and (if asked) pairs that are too long or too unequal
    in length are skipped and counted in `report`, or raise with `strict`.

    Args:
        source_path: str or path-like, a glob pattern (`"train.*.en.gz"`), or
            a list of them: the source shards, in order.
        target_path: the target shards, the same way, one per source shard.
        skip_empty: bool. Skip pairs with an empty side (True) or raise
            (False). Defaults to True.
        strict: bool. Raise at the first bad line instead of skipping it; the
            error names the file and line. Defaults to False.
        max_words: int or None. Skip pairs with more whitespace-separated
            words on a side. Defaults to None.
        max_ratio: float or None. Skip pairs whose word counts differ by more
            than this factor (Moses' clean-corpus uses 9). Defaults to None.
        report: a `CorpusReport` that counts what was read, kept and skipped.
            Defaults to None.
        with_locations: bool. Add `"FILE line N"` as a third element.
            Defaults to False.

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars, in file
        order.

    Raises:
        FileNotFoundError: a missing file, or a pattern matching nothing.
        ValueError: a shard pair with different line counts (both files and
            counts named), different numbers of shards, an empty corpus, a
            truncated gzip file.
        tf.errors.InvalidArgumentError: while reading, with `strict` (or
            `skip_empty=False`): "Corpus error: FILE line N: ..."; see
            `streaming.corpus_error`.

    Example:

    >>> pairs = load_parallel_files("corpus.en", "corpus.de")  # doctest: +SKIP
    >>> shards = load_parallel_files("wmt/train.*.en.gz", "wmt/train.*.de.gz")  # doctest: +SKIP
    """
    return read_parallel_text(
        source_path, target_path, strict=strict, skip_empty=skip_empty, max_words=max_words,
        max_ratio=max_ratio, report=report, with_locations=with_locations,
    )


def load_tsv(
    path,
    source_column=0,
    target_column=1,
    skip_empty=True,
    *,
    strict=False,
    max_words=None,
    max_ratio=None,
    report=None,
    with_locations=False,
):
    """Stream sentence pairs from tab-separated files (plain or gzip, one or several).

    Lines may have more columns than the two read (as in the Tatoeba/
    ManyThings files, whose third column is an attribution). A line with too
    few columns is skipped and counted (`malformed`), or raises with `strict`.

    Args:
        path: str or path-like, a glob pattern, or a list of them.
        source_column: int. 0-based column of the source. Defaults to 0.
        target_column: int. 0-based column of the target. Defaults to 1.
        skip_empty: as in `load_parallel_files`.
        strict: as in `load_parallel_files`.
        max_words: as in `load_parallel_files`.
        max_ratio: as in `load_parallel_files`.
        report: as in `load_parallel_files`.
        with_locations: as in `load_parallel_files`.

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars.

    Example:

    >>> pairs = load_tsv("fra.txt")  # doctest: +SKIP
    """
    return read_tsv_text(
        path, source_column, target_column, strict=strict, skip_empty=skip_empty,
        max_words=max_words, max_ratio=max_ratio, report=report, with_locations=with_locations,
    )


def load_tfds_translation(
    name, source, target, split="train", data_dir=None, download=True, download_config=None
):
    """Load a TFDS translation data set by name as `(source, target)` pairs.

    Works with data sets whose features are one string per language, such as
    `wmt14_translate/de-en`, `ted_hrlr_translate/pt_to_en` or this package's
    `multi30k_task1/de-en`.

    Args:
        name: str. A TFDS name, with config if any (`"wmt14_translate/de-en"`).
        source: str. The source language feature (`"de"`).
        target: str. The target language feature (`"en"`).
        split: str. A TFDS split, slicing allowed (`"train[:10%]"`). Defaults
            to `"train"`.
        data_dir: str. TFDS data folder. Defaults to TFDS's own.
        download: bool. Prepare the data set if it is not yet. Defaults to True.
        download_config: `tfds.download.DownloadConfig` (e.g. with a
            `manual_dir`). Defaults to None.

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars.

    Raises:
        ValueError: unknown name (close names listed), a language that the
            data set does not have, or an unknown split.

    Example:

    >>> pairs = load_tfds_translation("multi30k_task1/de-en", "de", "en",
    ...                               split="validation")  # doctest: +SKIP
    """
    import tensorflow_datasets as tfds

    import keras_attention.data.multi30k_tfds  # noqa: F401 (registers multi30k_task1)

    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError as e:
        base = name.split("/")[0].split(":")[0]
        close = difflib.get_close_matches(base, tfds.list_builders(), n=5)
        hint = f" Close names: {', '.join(close)}." if close else ""
        raise ValueError(
            f"`name` is not a registered TFDS data set (nor one prepared in "
            f"data_dir={data_dir!r}).{hint} Received: name={name!r}"
        ) from e
    if isinstance(builder.info.features, tfds.features.TranslationVariableLanguages):
        raise ValueError(
            f"`name` has a variable set of languages per example, which is not "
            f"supported. Received: name={name!r}"
        )
    languages = _languages(builder.info.features)
    for arg, value in (("source", source), ("target", target)):
        if value not in languages:
            raise ValueError(
                f"`{arg}` must be one of the languages of {name}: {sorted(languages)}. "
                f"Received: {arg}={value!r}"
            )
    if download:
        builder.download_and_prepare(download_config=download_config)
    try:
        examples = builder.as_dataset(split=split, shuffle_files=False)
    except (ValueError, KeyError) as e:
        raise ValueError(
            f"`split` is not a split of {name} (splits: {sorted(builder.info.splits)}). "
            f"Received: split={split!r} ({e})"
        ) from None

    def to_pair(example):
        return example[source], example[target]

    return examples.map(to_pair, num_parallel_calls=tf.data.AUTOTUNE)


def _languages(features):
    languages = getattr(features, "languages", None)
    if languages:
        return set(languages)
    if hasattr(features, "keys"):
        return set(features.keys())
    return set()
