"""WMT14 English-German (Bojar et al., 2014, https://aclanthology.org/W14-3302/), from local data.

Two layouts are read, looked for in this order in `data_dir`:

1. TFDS's `wmt14_translate/de-en`, already prepared in that TFDS data folder
   (`tfds build wmt14_translate/de-en --data_dir DATA_DIR` on a machine that
   can download): `DATA_DIR/wmt14_translate/de-en/<version>/`.
2. Plain text files, one sentence a line, plain or gzip, in `data_dir` or
   `data_dir/wmt14`: `train.en`, `train.de` (4.5 million pairs),
   `newstest2013.en/.de` (validation, 3,000 pairs) and `newstest2014.en/.de`
   (test, 3,003 pairs), as in the Stanford NMT release of WMT14
   (https://nlp.stanford.edu/projects/nmt/). A name may end in `.gz`.

Nothing is downloaded: the training set is 4.5 million pairs, which a user
fetches once, on purpose. Text files are streamed line by line.
"""

import glob
import os

from keras_attention.base.validation import check_choice
from keras_attention.data.parallel import load_parallel_files, load_tfds_translation

LANGUAGES = ("en", "de")
SPLITS = {"train": "train", "validation": "newstest2013", "test": "newstest2014"}
SPLIT_ALIASES = {"valid": "validation", "val": "validation", "newstest2013": "validation",
                 "newstest2014": "test"}
TFDS_NAME = "wmt14_translate/de-en"


def load_wmt14(source="en", target="de", split="train", data_dir=None, **options):
    """Load a split of WMT14 English-German from local files or a prepared TFDS folder.

    Args:
        source: str. "en" or "de". Defaults to "en".
        target: str. The other one. Defaults to "de".
        split: str. "train", "validation" (newstest2013) or "test"
            (newstest2014). Defaults to "train".
        data_dir: str. The folder holding the files or the TFDS data.
        **options: for text files, the options of `load_parallel_files`
            (`strict`, `max_words`, `max_ratio`, `report`, ...).

    Returns:
        A `tf.data.Dataset` of `(source, target)` string scalars, streamed.

    Raises:
        ValueError: a language other than en/de, an unknown split, or no
            WMT14 data in `data_dir` (the message lists what was looked for).

    Example:

    >>> pairs = load_wmt14("en", "de", "train", data_dir="/data/wmt14")  # doctest: +SKIP
    """
    check_choice("source", source, LANGUAGES)
    check_choice("target", target, LANGUAGES)
    if source == target:
        raise ValueError(f"`source` and `target` must differ. Received: source={source!r}, target={target!r}")
    split = SPLIT_ALIASES.get(split, split)
    check_choice("split", split, tuple(SPLITS))
    if data_dir is None:
        raise ValueError("WMT14 is read from local files: pass data_dir (--data-dir), the folder "
                         "holding train.en/train.de/newstest2013.*/newstest2014.* or TFDS data. "
                         "Received: data_dir=None")
    data_dir = os.fspath(data_dir)
    if glob.glob(os.path.join(data_dir, *TFDS_NAME.split("/"), "*", "dataset_info.json")):
        return load_tfds_translation(TFDS_NAME, source, target, split, data_dir=data_dir, download=False)
    paths = [wmt14_file(data_dir, SPLITS[split], language) for language in (source, target)]
    return load_parallel_files(paths[0], paths[1], **options)


def wmt14_file(data_dir, prefix, language):
    """The path of `PREFIX.LANG` or `PREFIX.LANG.gz` in `data_dir` or `data_dir/wmt14`."""
    tried = []
    for folder in (data_dir, os.path.join(data_dir, "wmt14")):
        for name in (f"{prefix}.{language}", f"{prefix}.{language}.gz"):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return path
            tried.append(path)
    raise ValueError(
        f"No WMT14 file {prefix}.{language} in {data_dir} (looked for {', '.join(tried)}; nor a "
        f"TFDS {TFDS_NAME} folder there). See the docstring of keras_attention.data.wmt14."
    )
