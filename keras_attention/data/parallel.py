"""The user's own parallel text, and translation data sets from TFDS by name."""

import difflib
import os

import tensorflow as tf

from keras_attention.data.text_files import logger, read_all_lines, read_parallel_lines


def load_parallel_files(source_path, target_path, skip_empty=False):
    """Load two line-aligned text files (plain or gzip) as sentence pairs.

    Args:
        source_path: str or path-like. One source sentence a line.
        target_path: str or path-like. Its translation, line by line.
        skip_empty: bool. Leave out pairs with an empty side (and log how
            many) instead of raising. Defaults to False.

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: different line counts (both files and counts named), an
            empty file, a line that is not UTF-8 or (unless `skip_empty`) an
            empty line (file and line named).

    Example:

    >>> pairs = load_parallel_files("corpus.en", "corpus.de")  # doctest: +SKIP
    """
    source, target = read_parallel_lines(source_path, target_path, skip_empty=skip_empty)
    return tf.data.Dataset.from_tensor_slices((source, target))


def load_tsv(path, source_column=0, target_column=1, skip_empty=False):
    """Load sentence pairs from a tab-separated file (plain or gzip).

    Lines may have more columns than the two read (as in the Tatoeba/
    ManyThings files, whose third column is an attribution).

    Args:
        path: str or path-like. One pair a line, fields separated by tabs.
        source_column: int. 0-based column of the source. Defaults to 0.
        target_column: int. 0-based column of the target. Defaults to 1.
        skip_empty: bool. Leave out empty lines and pairs with an empty side
            (and log how many) instead of raising. Defaults to False.

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a line with too few columns, an empty side or empty line
            (unless `skip_empty`), bad UTF-8, an empty file; the file and the
            1-based line are named.

    Example:

    >>> pairs = load_tsv("fra.txt")  # doctest: +SKIP
    """
    for name, value in (("source_column", source_column), ("target_column", target_column)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"`{name}` must be an int >= 0. Received: {name}={value!r}")
    if source_column == target_column:
        raise ValueError(
            "`source_column` and `target_column` must differ. "
            f"Received: source_column={source_column}, target_column={target_column}"
        )
    path = os.fspath(path)
    needed = max(source_column, target_column) + 1
    source, target, skipped = [], [], 0
    for number, line in enumerate(read_all_lines(path), start=1):
        fields = line.split("\t")
        where = f"{os.path.basename(path)} line {number}"
        if not line.strip() or (
            len(fields) >= needed
            and not (fields[source_column].strip() and fields[target_column].strip())
        ):
            if skip_empty:
                skipped += 1
                continue
            raise ValueError(
                f"{where}: empty line or empty field (file {path}). "
                "Pass skip_empty=True to leave such lines out."
            )
        if len(fields) < needed:
            raise ValueError(
                f"{where}: expected at least {needed} tab-separated columns, found "
                f"{len(fields)} (file {path}). Received: {line[:80]!r}"
            )
        source.append(fields[source_column])
        target.append(fields[target_column])
    if skipped:
        logger.warning("%s: skipped %d empty line(s) or pair(s) with an empty side.", path, skipped)
    if not source:
        raise ValueError(f"{path}: no sentence pairs.")
    return tf.data.Dataset.from_tensor_slices((source, target))


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

