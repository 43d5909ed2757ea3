"""Strict readers for one-sentence-a-line text files, gzip-compressed or plain.

Everything here is plain Python: a corpus is read once into a list of strings,
and every problem is reported with the file name and the 1-based line number,
so that nothing is lost silently (a bad byte, an empty line, a file one line
shorter than its translation).
"""

import gzip
import logging
import os
import zlib

from keras_attention.base.corpus_files import GZIP_MAGIC

logger = logging.getLogger("keras_attention.data")


def _read_bytes(path):
    """Return the content of `path`, gunzipped if it is a gzip file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file.")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a folder, expected a text file.")
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{path}: not a valid gzip file ({e}).") from e
    return data


def _decode_line(path, number, raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = raw[e.start : e.start + 1]
        raise ValueError(
            f"{os.path.basename(path)} line {number}: not valid UTF-8 "
            f"(byte 0x{bad.hex()} at byte {e.start + 1} of the line; file {path})."
        ) from None


def read_lines(path, skip_empty=False):
    """Read a UTF-8 text file (gzip or plain) into a list of lines.

    Line ends (`\\n` or `\\r\\n`) are removed and a UTF-8 byte order mark at the
    start of the file is dropped; nothing else is changed.

    Args:
        path: str or path-like. A text file, gzip-compressed or not (detected
            from its first bytes, not from its name).
        skip_empty: bool. If False, a line that is empty or only whitespace is
            an error naming the file and line; if True such lines are left out
            and their number is logged as a warning. Defaults to False.

    Returns:
        A list of str, one per line.

    Raises:
        FileNotFoundError: `path` does not exist.
        ValueError: the file is empty, is a broken gzip file, has a line that
            is not UTF-8, or (unless `skip_empty`) has an empty line. The
            message names the file and the 1-based line number.

    Example:

    >>> lines = read_lines("train.de.gz")  # doctest: +SKIP
    """
    path = os.fspath(path)
    lines, empty = [], []
    for number, line in enumerate(read_all_lines(path), start=1):
        if line.strip():
            lines.append(line)
        elif skip_empty:
            empty.append(number)
        else:
            raise ValueError(
                f"{os.path.basename(path)} line {number}: empty line (file {path}). "
                "Pass skip_empty=True to leave empty lines out."
            )
    if empty:
        logger.warning(
            "%s: skipped %d empty line(s) (first at line %d).", path, len(empty), empty[0]
        )
    if not lines:
        raise ValueError(f"{path}: the file has no non-empty lines.")
    return lines


def read_parallel_lines(source_path, target_path, skip_empty=False):
    """Read two line-aligned files: line N of one translates line N of the other.

    Args:
        source_path: str or path-like. The source-language file.
        target_path: str or path-like. The target-language file.
        skip_empty: bool. If True, a pair is left out when either side is an
            empty line, and the number of pairs left out is logged as a
            warning; if False an empty line is an error. Defaults to False.

    Returns:
        A tuple `(source_lines, target_lines)` of two lists of str with equal
        lengths.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: the files have different numbers of lines (both files and
            both counts are named), or a file is empty, not UTF-8, or (unless
            `skip_empty`) has an empty line.

    Example:

    >>> en, de = read_parallel_lines("val.en.gz", "val.de.gz")  # doctest: +SKIP
    """
    source_path, target_path = os.fspath(source_path), os.fspath(target_path)
    if not skip_empty:
        source = read_lines(source_path)
        target = read_lines(target_path)
        _check_same_count(source_path, len(source), target_path, len(target))
        return source, target

    # Count lines with the empty ones included, so that the alignment check
    # is made on the files as they are, then drop pairs with an empty side.
    source_all = read_all_lines(source_path)
    target_all = read_all_lines(target_path)
    _check_same_count(source_path, len(source_all), target_path, len(target_all))
    pairs = [(s, t) for s, t in zip(source_all, target_all) if s.strip() and t.strip()]
    skipped = len(source_all) - len(pairs)
    if skipped:
        logger.warning(
            "%s / %s: skipped %d pair(s) with an empty side out of %d.",
            source_path,
            target_path,
            skipped,
            len(source_all),
        )
    if not pairs:
        raise ValueError(f"{source_path} / {target_path}: no pair has text on both sides.")
    return [s for s, _ in pairs], [t for _, t in pairs]


def read_all_lines(path):
    """All lines of a UTF-8 file (gzip or plain), empty ones included.

    Line ends and a leading byte order mark are removed. Raises as
    `read_lines` does, except for empty lines, which are kept as they are.
    """
    data = _read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise ValueError(f"{path}: the file is empty (no text lines).")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    return [
        _decode_line(path, n, raw[:-1] if raw.endswith(b"\r") else raw)
        for n, raw in enumerate(raw_lines, start=1)
    ]


def _check_same_count(source_path, source_count, target_path, target_count):
    if source_count != target_count:
        raise ValueError(
            "Parallel files must have the same number of lines. Received: "
            f"{source_path} has {source_count} lines, {target_path} has {target_count} lines."
        )
