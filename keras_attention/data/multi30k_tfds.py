"""A TensorFlow Datasets builder for Multi30k task 1, registered as `multi30k_task1`.

Importing this module registers the builder; then, with the twelve `.gz`
files of `data/task1/raw/` in a folder:

    import tensorflow_datasets as tfds
    import keras_attention.data.multi30k_tfds  # noqa: F401 (registers it)

    ds = tfds.load(
        "multi30k_task1/de-en",
        split="validation",
        data_dir="/tmp/tfds",
        download_and_prepare_kwargs={
            "download_config": tfds.download.DownloadConfig(manual_dir=folder)
        },
    )

Without a manual folder, the files are found as `load_multi30k` finds them
(`$KERAS_ATTENTION_DATA/multi30k`, the Keras cache, else a checked download).
"""

import itertools

import tensorflow_datasets as tfds

from keras_attention.data.multi30k import BASE_URL, LANGUAGES, multi30k_filename, multi30k_paths
from keras_attention.data.text_files import read_parallel_lines

# TFDS split name -> file name prefix.
_SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


class Multi30kConfig(tfds.core.BuilderConfig):
    """One language pair, e.g. name `"de-en"` with `languages=("de", "en")`."""

    def __init__(self, languages, **kwargs):
        super().__init__(name="-".join(languages), **kwargs)
        self.languages = tuple(languages)


class Multi30kTask1(tfds.core.GeneratorBasedBuilder):
    """Multi30k task 1: image descriptions in en, de, fr, cs, aligned by line.

    Configs name an ordered language pair, `source-target` (`de-en`,
    `en-de`, `en-fr`, ..., all twelve); examples are `{source: sentence,
    target: sentence}` and the supervised keys are `(source, target)`, so
    `as_supervised=True` gives pairs in the config's direction. Splits:
    `train` (29,000), `validation` (1,014) and `test` (test_2016_flickr, 1,000).
    """

    # tfds 4.9.10 finds a builder's source file through `importlib_resources`,
    # which it does not install on Python >= 3.9 (tensorflow/datasets#11212);
    # naming the file here skips that look-up.
    code_path = tfds.core.Path(__file__)
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Raw files at multi30k/dataset commit a3d2e0d."}
    BUILDER_CONFIGS = [
        Multi30kConfig(pair, description=f"Multi30k task 1, {pair[0]} and {pair[1]}.")
        for pair in itertools.permutations(LANGUAGES, 2)
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Put the files {train,val,test_2016_flickr}.{en,de,fr,cs}.gz of "
        f"{BASE_URL} in the manual folder (tfds.download.DownloadConfig(manual_dir=...)). "
        "Without one, $KERAS_ATTENTION_DATA/multi30k and the Keras cache are used, "
        "or the files are downloaded."
    )

    def _info(self):
        languages = self.builder_config.languages
        return self.dataset_info_from_configs(
            features=tfds.features.Translation(languages=languages),
            supervised_keys=languages,
            homepage="https://github.com/multi30k/dataset",
            citation=(
                "@inproceedings{elliott-etal-2016-multi30k, title={Multi30K: Multilingual "
                "English-German Image Descriptions}, author={Elliott, Desmond and Frank, "
                "Stella and Sima'an, Khalil and Specia, Lucia}, booktitle={Proceedings of "
                "the 5th Workshop on Vision and Language}, year={2016}, pages={70--74}}"
            ),
        )

    def _split_generators(self, dl_manager):
        try:
            folder = dl_manager.manual_dir
        except AssertionError:  # No manual folder given, or an empty one.
            folder = None
        return {
            tfds_split: self._generate_examples(folder, split)
            for tfds_split, split in _SPLITS.items()
        }

    def _generate_examples(self, folder, split):
        first, second = self.builder_config.languages
        names = [multi30k_filename(split, first), multi30k_filename(split, second)]
        paths = multi30k_paths(names, data_dir=folder)
        for index, (a, b) in enumerate(zip(*read_parallel_lines(*paths))):
            yield index, {first: a, second: b}
