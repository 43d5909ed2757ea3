"""Fixtures for the serving tests: a briefly trained Multi30k translator and its exports.

The translations need not be good, only the same in memory and after export,
so the model is small and trained for a few dozen steps on a slice of
Multi30k, with tokenizers learned from that slice. The translator and its two
exports are built once for the whole test run (`shared_folder`); every worker
loads them from there.
"""

import json

import keras
import pytest
import tensorflow as tf

from tests.conftest import shared_folder


MAX_SOURCE_LENGTH = 40
MAX_TARGET_LENGTH = 40
VALIDATION_SAMPLE = 100
# The decoding settings of the test run's two exports, by method (what the tests translate with in memory to compare).
EXPORTED = {"greedy": {}, "beam": {"beam_size": 3, "length_penalty": 0.6}}


def _train_translator(folder, multi30k_dir):
    """A 1-layer Transformer with 1,000-token vocabularies, trained for 30 steps, saved in `folder`."""
    from keras_attention import data
    from keras_attention.decoding.translator import Translator
    from keras_attention.models import build_model
    from keras_attention.training.losses import MaskedSparseCrossEntropy

    keras.utils.set_random_seed(0)
    pairs = data.load_multi30k("en", "de", "train", data_dir=multi30k_dir).take(4000)
    source = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: s), 1000, lower_case=True)
    target = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: t), 1000)
    batches = data.make_translation_dataset(pairs, source, target, 64, max_length=48, shuffle=True, seed=0)
    model = build_model(
        "transformer", "tiny", source.vocab_size, target.vocab_size, max_length=48,
        num_layers=1, d_model=64, num_heads=2, intermediate_dim=128,
    )
    (source_ids, target_in), _ = next(iter(batches))
    model((source_ids[:1], target_in[:1]))  # built: the optimizer is then built before the step is traced
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=MaskedSparseCrossEntropy(), jit_compile=False)
    model.fit(batches.take(30), epochs=1, verbose=0, shuffle=False)
    Translator(model, source, target, MAX_SOURCE_LENGTH, MAX_TARGET_LENGTH).save(str(folder))


@pytest.fixture(scope="session")
def translator_dir(tmp_path_factory, multi30k_dir):
    """The folder of the test run's one trained serving translator."""
    return shared_folder(tmp_path_factory, "serving_translator",
                         lambda folder: _train_translator(folder, multi30k_dir))


@pytest.fixture(scope="session")
def translator(translator_dir):
    """The trained `Translator` (1-layer Transformer, 1,000-token vocabularies), loaded from `translator_dir`."""
    from keras_attention.decoding.translator import Translator

    return Translator.load(str(translator_dir))


@pytest.fixture(scope="session")
def validation_sample(multi30k_dir):
    """The first English sentences of the Multi30k validation split."""
    from keras_attention import data

    pairs = data.load_multi30k("en", "de", "val", data_dir=multi30k_dir).take(VALIDATION_SAMPLE)
    return [source.decode("utf-8") for source, _ in pairs.as_numpy_iterator()]


@pytest.fixture(scope="session")
def exports(translator_dir, tmp_path_factory):
    """`{"greedy": dir, "beam": dir}`: version folders exported from the translator (once for the run)."""

    def build(root):
        from keras_attention.decoding.translator import Translator
        from keras_attention.serving import export

        translator = Translator.load(str(translator_dir))
        paths = {method: export(translator, str(root / method), method=method, **settings)
                 for method, settings in EXPORTED.items()}
        (root / "paths.json").write_text(json.dumps(paths))

    root = shared_folder(tmp_path_factory, "serving_exports", build)
    return json.loads((root / "paths.json").read_text())


@pytest.fixture(scope="session")
def signatures(exports):
    """The reloaded `serving_default` and `translate_ids` functions of each export."""
    loaded = {method: tf.saved_model.load(path) for method, path in exports.items()}
    return {
        method: (model.signatures["serving_default"], model.signatures["translate_ids"], model)
        for method, model in loaded.items()
    }
