"""Corpus files on disk: found (paths, globs, lists), counted, compared, hashed.

Everything reads a file in 1 MiB chunks, so memory does not depend on its size.
Gzip files are recognised by their first bytes, whatever their name.
"""

import glob
import gzip
import hashlib
import os
import zlib

_CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"


def expand_files(spec, name="path"):
    """A sorted list of existing files from a path, a glob pattern or a list of them.

    Args:
        spec: str, path-like, or a list/tuple of them. Patterns use `glob`
            syntax (`"train.*.en.gz"`); each pattern's matches are sorted, and
            the list keeps the order given.
        name: str. The argument's name for error messages.

    Raises:
        FileNotFoundError: a path that does not exist, or a pattern that
            matches nothing.
        ValueError: an empty list, or a folder where a file is expected.
    """
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    if not items:
        raise ValueError(f"`{name}` must name at least one file. Received: {name}={spec!r}")
    files = []
    for item in items:
        item = os.fspath(item)
        if glob.has_magic(item):
            matches = sorted(p for p in glob.glob(item) if os.path.isfile(p))
            if not matches:
                raise FileNotFoundError(f"{item}: no file matches this pattern ({name}).")
            files += matches
        elif os.path.isdir(item):
            raise ValueError(f"{item}: is a folder, expected a text file ({name}).")
        elif not os.path.isfile(item):
            raise FileNotFoundError(f"{item}: no such file ({name}).")
        else:
            files.append(item)
    return files


def is_gzip(path):
    """True if the file starts with the gzip magic bytes (whatever its name)."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def sha256_of(path):
    """Return the hex SHA-256 of the file at `path`, read 1 MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def count_lines(path):
    """Number of lines in a text file (plain or gzip), reading 1 MiB at a time.

    A last line without a newline counts. Memory is one chunk, whatever the
    file's size.

    Raises:
        ValueError: a gzip file that is truncated or corrupt (named).
    """
    opener = gzip.open if is_gzip(path) else open
    lines, last = 0, b"\n"
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(f"{path}: not a valid gzip file, truncated or corrupt ({error}).") from None
    return lines + (last != b"\n")


def check_alignment(source_files, target_files):
    """Compare the line counts of each source/target shard pair; return the counts.

    Raises:
        ValueError: different numbers of shards, or a pair whose counts
            differ (both files and both counts named), or no lines at all.
    """
    if len(source_files) != len(target_files):
        raise ValueError(
            f"Source and target must have the same number of files. Received: "
            f"{len(source_files)} source file(s) {source_files[:3]}, "
            f"{len(target_files)} target file(s) {target_files[:3]}"
        )
    counts = []
    for source, target in zip(source_files, target_files):
        source_count, target_count = count_lines(source), count_lines(target)
        if source_count != target_count:
            raise ValueError(
                "Parallel files must have the same number of lines. Received: "
                f"{source} has {source_count} lines, {target} has {target_count} lines."
            )
        counts.append(source_count)
    if not sum(counts):
        raise ValueError(f"{source_files[0]}: the corpus is empty (no text lines).")
    return counts


# The file that makes a folder a prepared corpus (`keras-attention prepare`, `data.PreparedCorpus`).
MANIFEST = "manifest.json"


def is_prepared(folder):
    """True if `folder` holds a prepared corpus (its manifest)."""
    return folder is not None and os.path.isfile(os.path.join(os.fspath(folder), MANIFEST))
