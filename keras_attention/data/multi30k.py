"""Multi30k, task 1: image descriptions translated sentence by sentence.

Elliott et al., 2016, "Multi30K: Multilingual English-German Image
Descriptions" (https://arxiv.org/abs/1605.00459); French: Elliott et al., 2017;
Czech: Barrault et al., 2018. The raw (cased, untokenized) gzip files of
https://github.com/multi30k/dataset, folder `data/task1/raw/`, one sentence a
line, line N of one language translating line N of another.
"""

import os
import tempfile
import warnings

import keras

from keras_attention import DATA_ENV_VAR
from keras_attention.base.corpus_files import sha256_of
from keras_attention.base.options import MULTI30K_LANGUAGES, check_multi30k_languages
from keras_attention.base.validation import check_choice
from keras_attention.data.streaming import read_parallel_text

LANGUAGES = MULTI30K_LANGUAGES
SPLITS = ("train", "val", "test_2016_flickr")
# Names other tools use for the same splits (TFDS calls them so).
SPLIT_ALIASES = {"validation": "val", "test": "test_2016_flickr"}
SPLIT_SIZES = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}

# The files of the multi30k/dataset repository, pinned to one commit (checked by SHA256 below).
BASE_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/"
    "a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/"
)
SHA256 = {
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}
CACHE_SUBDIR = os.path.join("datasets", "multi30k")


def multi30k_filename(split, language):
    """Return the raw file name of one split and language, e.g. `"val.de.gz"`."""
    split = SPLIT_ALIASES.get(split, split)
    check_choice("split", split, SPLITS + tuple(SPLIT_ALIASES))
    check_choice("language", language, LANGUAGES)
    return f"{split}.{language}.gz"


def load_multi30k(
    source="en", target="de", split="train", data_dir=None, base_url=BASE_URL, cache_dir=None,
    report=None,
):
    """Load a split of Multi30k task 1 as a dataset of sentence pairs.

    Given `data_dir` (the folder holding the `.gz` files, or its parent
    holding `multi30k/`), the files are read from there, and a missing one is
    an error. Without it they are looked for in `$KERAS_ATTENTION_DATA/
    multi30k`, then in the Keras cache folder (`~/.keras/datasets/multi30k`,
    or under `$KERAS_HOME` or `cache_dir`); if they are in neither, they are
    downloaded into the cache with `keras.utils.get_file` and checked against
    their SHA-256 sums. Files found locally are checked too: one that differs
    from the published file (a copy cut short, or edited on purpose) is used
    as it is, with a one-line warning naming it.

    Args:
        source: str. Source language, one of `"en"`, `"de"`, `"fr"`, `"cs"`.
            Defaults to `"en"`.
        target: str. Target language, as `source` but different. Defaults to
            `"de"`.
        split: str. `"train"` (29,000 pairs), `"val"` (1,014) or
            `"test_2016_flickr"` (1,000); `"validation"` and `"test"` are
            accepted as aliases. Defaults to `"train"`.
        data_dir: str or path-like. The folder to read the files from (no other
            copy, no download). Defaults to None.
        base_url: str. Where to download from: a URL ending with `/` under
            which the files are named as in `data/task1/raw/`. Defaults to the
            multi30k/dataset repository at a fixed commit.
        cache_dir: str. The Keras cache folder to use instead of `$KERAS_HOME`
            or `~/.keras`. Defaults to None.
        report: a `CorpusReport` counting the pairs read. Defaults to None.

    Returns:
        A `tf.data.Dataset` of `(source_sentence, target_sentence)` pairs of
        scalar `tf.string` tensors, in file order.

    Raises:
        ValueError: unknown language or split, or `source == target`; a
            downloaded file whose checksum does not match (the file is
            deleted); files with different line counts.
        FileNotFoundError: `data_dir` lacks one of them.
        OSError: the files are nowhere locally and the download failed.
        tf.errors.InvalidArgumentError: while reading, a line that is not
            valid UTF-8 or is empty ("Corpus error: FILE line N: ...").

    Example:

    >>> pairs = load_multi30k("de", "en", split="val")  # doctest: +SKIP
    >>> for de, en in pairs.take(1):  # doctest: +SKIP
    ...     print(de.numpy().decode(), "->", en.numpy().decode())
    """
    check_multi30k_languages(source, target)
    split = SPLIT_ALIASES.get(split, split)
    check_choice("split", split, SPLITS + tuple(SPLIT_ALIASES))
    names = [multi30k_filename(split, source), multi30k_filename(split, target)]
    paths = multi30k_paths(names, data_dir=data_dir, base_url=base_url, cache_dir=cache_dir, stacklevel=3)
    # The same streaming reader as any corpus; Multi30k has no bad lines, so any is an error.
    return read_parallel_text(paths[0], paths[1], strict=True, report=report)


def multi30k_paths(names, data_dir=None, base_url=BASE_URL, cache_dir=None, stacklevel=2):
    """Return local paths of the Multi30k files `names`, downloading if needed.

    A local file that is not the published one (its SHA-256 differs) is
    returned with a one-line warning.

    Args:
        names: list of file names such as `"train.en.gz"` (keys of `SHA256`).
        data_dir, base_url, cache_dir: as in `load_multi30k`.
        stacklevel: int. The frame the warning names, as in `warnings.warn`
            (2: the caller of this function).

    Returns:
        A list of paths, one per name, all in the same folder.
    """
    for folder in _local_folders(data_dir):
        if all(os.path.isfile(os.path.join(folder, name)) for name in names):
            paths = [os.path.join(folder, name) for name in names]
            for name, path in zip(names, paths):
                _warn_if_not_published(name, path, stacklevel + 1)  # one frame deeper
            return paths
    if data_dir is not None:  # asked for this folder: no other copy, no download in its place
        missing = next((name for name in names if not any(
            os.path.isfile(os.path.join(folder, name)) for folder in _local_folders(data_dir))), None)
        if missing is None:
            raise FileNotFoundError(f"{os.fspath(data_dir)}: the Multi30k files {' and '.join(names)} are split "
                                    "between it and its multi30k/ folder; put them in one.")
        raise FileNotFoundError(f"{os.fspath(data_dir)}: holds no Multi30k {missing} (nor does its multi30k/ "
                                "folder); give the folder that holds the files, or leave data_dir out.")
    cache = _cache_folder(cache_dir)
    return [download_multi30k_file(name, cache, base_url) for name in names]


# (path, size, modification time) -> SHA-256, for the local files this process has read: a run loads
# the same two files for each split, the tests dozens of times.
_CHECKED = {}


def _warn_if_not_published(name, path, stacklevel):
    """Warn (one line), naming the frame `stacklevel` (counted from here), if the local file `path` is not the
    published Multi30k file `name`."""
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _CHECKED:
        _CHECKED[key] = sha256_of(path)
    actual = _CHECKED[key]
    if actual != SHA256[name]:
        warnings.warn(
            f"{path} is not the published Multi30k {name} (sha256 {actual[:12]}..., expected "
            f"{SHA256[name][:12]}...); reading it as it is, so results are not comparable with others'.",
            stacklevel=stacklevel,
        )


def _local_folders(data_dir):
    """Where to look: `data_dir` (and its multi30k/) when given, else $KERAS_ATTENTION_DATA/multi30k."""
    if data_dir is not None:
        data_dir = os.fspath(data_dir)
        return [data_dir, os.path.join(data_dir, "multi30k")]
    if os.environ.get(DATA_ENV_VAR):
        if not os.path.isdir(os.environ[DATA_ENV_VAR]):  # a typo is named, not answered with a download
            raise FileNotFoundError(f"${DATA_ENV_VAR} is {os.environ[DATA_ENV_VAR]}, which is not a folder: set it "
                                    "to the folder holding multi30k/, or unset it to download Multi30k.")
        return [os.path.join(os.environ[DATA_ENV_VAR], "multi30k")]
    return []


def _cache_folder(cache_dir):
    """The absolute Multi30k folder in the Keras cache, resolved as Keras does."""
    base = os.path.expanduser(cache_dir or os.environ.get("KERAS_HOME") or "~/.keras")
    try:
        os.makedirs(base, exist_ok=True)
    except OSError:
        pass
    if not os.access(base, os.W_OK):
        base = os.path.join(tempfile.gettempdir(), ".keras")
    return os.path.abspath(os.path.join(base, CACHE_SUBDIR))


def download_multi30k_file(name, folder, base_url=BASE_URL):
    """Download one file into `folder` (or reuse a verified copy) and check it.

    Args:
        name: str. A file name, a key of `SHA256`.
        folder: str. The absolute destination folder.
        base_url: str. The URL the file name is appended to.

    Returns:
        The path of the verified file.

    Raises:
        ValueError: the downloaded file's SHA-256 differs from the expected
            one. The file is deleted first; the message names the file, the
            URL and both sums.
        OSError: the download failed; nothing is left in `folder`.
    """
    expected = SHA256[name]
    url = base_url.rstrip("/") + "/" + name
    path = os.path.join(folder, name)
    os.makedirs(folder, exist_ok=True)
    try:
        # With an absolute `cache_subdir`, `get_file` writes exactly to `path`.
        return keras.utils.get_file(
            fname=name, origin=url, file_hash=expected, cache_subdir=folder, hash_algorithm="sha256"
        )
    except ValueError:
        actual = sha256_of(path) if os.path.exists(path) else "(no file)"
        _remove(path)
        raise ValueError(
            f"Multi30k file {name}: checksum mismatch after downloading {url}. "
            f"Expected sha256 {expected}, got {actual}. The file was deleted; "
            "check the URL or your connection and try again."
        ) from None
    except (Exception, KeyboardInterrupt) as e:
        _remove(path)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise OSError(
            f"Multi30k file {name}: download from {url} failed ({e}). It is not in "
            f"the data_dir argument, ${DATA_ENV_VAR}/multi30k or {folder} either."
        ) from e


def _remove(path):
    if os.path.exists(path):
        os.remove(path)
