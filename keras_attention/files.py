"""Files written whole or not at all: a temporary name in the same folder, then a rename.

A reader (or a run killed half-way through a write) sees either the old file
or the new one, never part of one: `os.replace` within one file system is
atomic.
"""

import contextlib
import json
import os


@contextlib.contextmanager
def replaced_atomically(path):
    """Yield a temporary path beside `path`; on success rename it to `path`.

    The temporary name keeps `path`'s suffixes (Keras checks them:
    `model.keras` is written as `model.partial-PID.keras`). If the block
    raises, the temporary file is removed and `path` is untouched.

    Example:

    >>> with replaced_atomically("run/results.json") as partial:  # doctest: +SKIP
    ...     write_results(partial)
    """
    path = os.fspath(path)
    folder, name = os.path.split(path)
    stem, dot, suffixes = name.partition(".")
    partial = os.path.join(folder, f"{stem}.partial-{os.getpid()}{dot}{suffixes}")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def write_text(path, text):
    """Write `text` (UTF-8, `\\n` line ends) to `path` atomically."""
    with replaced_atomically(path) as partial:
        with open(partial, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def write_json(path, value, indent=None):
    """Write `value` as JSON (UTF-8, non-ASCII kept) to `path` atomically."""
    write_text(path, json.dumps(value, indent=indent, ensure_ascii=False))
