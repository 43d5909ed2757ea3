"""Files and folders written whole or not at all, and the translator folder's configuration read without TensorFlow.

Writes go to a temporary name beside the target, then a rename: a reader (or
a run killed half-way through a write) sees either the old file or folder or
the new one, never part of one (`os.replace` within one file system is atomic).
"""

import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil


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


@contextlib.contextmanager
def folder_replaced_atomically(path):
    """Yield a new empty folder beside `path`; on success it takes the place of `path`.

    What `path` held is removed only once the new folder is in place; if the
    block raises, the new folder goes and `path` is as it was (between the
    two renames of the swap, for an instant, `path` does not exist). The
    caller checks first that `path` may be replaced: it is removed whole. A
    symbolic link is followed (the folder it points to is replaced), and
    what killed writers left beside `path` is cleared first.

    Example:

    >>> with folder_replaced_atomically("exports/en-de") as staging:  # doctest: +SKIP
    ...     write_export(staging)
    """
    path = os.path.realpath(os.fspath(path))
    parent, name = os.path.split(path)
    if not name:
        raise ValueError(f"Cannot replace {path}: it is the root folder.")
    _clear_abandoned(parent, name)
    stem = f"{path}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staging, previous = stem, f"{stem}-previous"
    os.makedirs(staging)
    try:
        yield staging
        if os.path.isdir(path):
            os.replace(path, previous)
        os.replace(staging, path)
    except BaseException:
        if os.path.isdir(previous) and not os.path.exists(path):
            os.replace(previous, path)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(previous, ignore_errors=True)


def _clear_abandoned(parent, name):
    """Clear what a writer killed inside `folder_replaced_atomically(parent/name)` left: its staging folder is
    deleted, and the old folder, if it was killed between the two renames, is put back."""
    pattern = re.compile(re.escape(name) + r"\.partial-(\d+)-[0-9a-f]{8}(-previous)?$")
    for entry in sorted(os.listdir(parent)):
        match = pattern.match(entry)
        if not match or _alive(int(match.group(1))):
            continue
        if match.group(2) and not os.path.exists(os.path.join(parent, name)):
            os.replace(os.path.join(parent, entry), os.path.join(parent, name))
        else:
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _alive(pid):
    """Whether a process `pid` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


class OutputExistsError(FileExistsError, ValueError):
    """An output folder that may not be replaced (a `FileExistsError`, and a `ValueError` as other bad arguments)."""


def check_replaceable_folder(folder, holds_ours, what, overwrite):
    """Refuse, in one line, an output `folder` that `folder_replaced_atomically` must not replace: a file, a
    non-empty folder that `holds_ours(folder)` does not recognise as a `what`, or (without `overwrite`) one
    it does. A missing or empty folder passes."""
    if os.path.isfile(folder):
        raise OutputExistsError(f"{folder} is a file; give a folder for the {what}.")
    if not os.path.isdir(folder) or not os.listdir(folder):
        return
    if not holds_ours(folder):
        raise OutputExistsError(f"{folder} is not empty and holds no {what}, which is all that overwrite "
                                "(--overwrite) replaces; choose a new or empty folder.")
    if not overwrite:
        raise OutputExistsError(f"{folder} already holds a {what}; choose another folder or pass overwrite=True "
                                "(--overwrite).")


def check_output_file(path):
    """Refuse, in one line and before any work, a file path that cannot be written: a folder, or a path
    whose folder does not exist or is a file."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"Cannot write {path}: it is a folder; give a file name.")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(f"Cannot write {path}: {folder} is a file, not a folder.")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"Cannot write {path}: the folder {folder} does not exist.")


def write_text(path, text):
    """Write `text` (UTF-8, `\\n` line ends) to `path` atomically."""
    with replaced_atomically(path) as partial:
        with open(partial, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def write_json(path, value, indent=None):
    """Write `value` as JSON (UTF-8, non-ASCII kept) to `path` atomically."""
    write_text(path, json.dumps(value, indent=indent, ensure_ascii=False))


TRANSLATOR_KEYS = ("source_tokenizer", "target_tokenizer", "max_source_length", "max_target_length")


def _entry(name, doc):
    """A read-only attribute: `name` inside the run folder."""
    return property(lambda self: os.path.join(self.root, name), doc=doc)


@dataclasses.dataclass(frozen=True)
class RunPaths:
    """Where `train` writes each part of a run inside its folder `root`.

    Example:

    >>> RunPaths("runs/en-de").translator
    'runs/en-de/translator'
    """

    root: str
    translator = _entry("translator", "The translator folder (`Translator.save`), written at the start and the end.")
    backup = _entry("backup", "Keras' `BackupAndRestore` folder: what `--resume` continues from.")
    checkpoints = _entry("checkpoints", "The last epochs' weights (`--keep-checkpoints`), for averaging.")
    history = _entry("history.csv", "One line of metrics an epoch, over every process of the run.")
    results = _entry("results.json", "The finished run's scores, timings and configuration.")
    # What a run writes into its folder; any of them means the folder holds a run.
    ENTRIES = ("translator", "backup", "checkpoints", "history.csv", "results.json")

    def held(self):
        """The run entries `root` holds, in `ENTRIES` order: empty when it holds no run."""
        return [name for name in self.ENTRIES if os.path.exists(os.path.join(self.root, name))]


def translator_folder(path):
    """`path` when it holds a translator, else its `translator/` folder when it has one (a run
    folder written by `keras-attention train`); `path` itself otherwise, for the error to name."""
    inner = RunPaths(path).translator
    if not os.path.exists(os.path.join(path, "translator.json")) and os.path.isdir(inner):
        return inner
    return path


def read_translator_config(directory):
    """The dict in `directory/translator.json`, checked; a one-line error when the folder holds no translator.

    Reads no weights and imports no TensorFlow, so the command line checks a
    folder before it starts TensorFlow; `Translator.load` calls it too.
    """
    config_path = os.path.join(directory, "translator.json")
    if os.path.isfile(directory):
        raise NotADirectoryError(f"{directory} is a file: give the translator's folder "
                                 f"({os.path.dirname(directory) or '.'} if this is its translator.json).")
    if os.path.isfile(os.path.join(directory, "model.bin")) and not os.path.exists(config_path):
        raise FileNotFoundError(f"{directory} holds a CTranslate2 model (model.bin), not a Keras translator: "
                                "add --engine ctranslate2 (in Python, serving.CTranslate2Translator).")
    if not os.path.exists(config_path):
        raise FileNotFoundError(
            f"No translator in {directory!r}: {config_path!r} is missing "
            "(write one with Translator.save or `keras-attention train`)."
        )
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        where = f"line {error.lineno}: {error.msg}" if isinstance(error, json.JSONDecodeError) else "not UTF-8"
        raise ValueError(f"{config_path}: invalid JSON ({where}); write it again with Translator.save "
                         "or `keras-attention train`.") from None
    missing = [key for key in TRANSLATOR_KEYS if key not in config] if isinstance(config, dict) else TRANSLATOR_KEYS
    if missing:
        raise ValueError(f"{config_path}: not a translator configuration (no {', '.join(missing)}).")
    return config
