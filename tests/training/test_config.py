"""TrainConfig: four sections, every choice checked when it is made, before a file is read."""

import glob
import json
import re
from pathlib import Path

import pytest

from keras_attention.training import recipe
from keras_attention.training.config import (DataConfig, ModelConfig, OptimizationConfig, RunConfig, TrainConfig)

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "multi30k"


@pytest.mark.parametrize("field, typo", [
    ("model", "transfromer"), ("preset", "huge"), ("dataset", "multi31k"), ("precision", "float8"),
    ("bucket_method", "shortest"), ("lr_schedule", "linear"),
])
def test_a_typo_in_a_choice_fails_at_construction(field, typo, tmp_path, monkeypatch):
    read = []
    monkeypatch.setattr(recipe, "training_data", lambda *args: read.append(args))  # must never be reached
    with pytest.raises(ValueError, match=re.escape(f"{field}={typo!r}")):
        recipe.train(TrainConfig.from_flat(**{"dataset": "files", field: typo},
                                           train_files=(str(tmp_path / "missing.en"), str(tmp_path / "missing.de")),
                                           output_dir=str(tmp_path / "run")))
    assert read == [] and not (tmp_path / "run").exists()


def test_each_setting_lives_in_one_section():
    config = TrainConfig()
    sections = {"data": DataConfig, "model": ModelConfig, "optimization": OptimizationConfig, "run": RunConfig}
    fields = [(section, name) for section, cls in sections.items() for name in cls.__dataclass_fields__]
    assert len(fields) == len(config.flat()) == 49  # every flat name is one field of one section
    assert config.data.dataset == "multi30k" and config.model.kind == "transformer"
    assert config.optimization.epochs == 10 and config.run.output_dir == "runs/latest"


def test_flat_names_round_trip_and_replace_checks_again():
    config = TrainConfig.from_flat(model="luong", preset="tiny", dataset="files", train_files=["a.en", "a.de"],
                                   epochs=3, learning_rate=5e-4, keep_checkpoints=0, overrides={"units": 32})
    assert (config.model.kind, config.model.preset, config.model.overrides) == ("luong", "tiny", {"units": 32})
    assert config.data.train_files == ("a.en", "a.de")  # a list from JSON becomes the tuple the loaders take
    assert (config.optimization.epochs, config.optimization.learning_rate, config.run.keep_checkpoints) == (3, 5e-4, 0)
    assert TrainConfig.from_flat(**config.flat()) == config
    assert config.replace(epochs=4).optimization.epochs == 4 and config.optimization.epochs == 3
    with pytest.raises(ValueError, match="epochs=0"):
        config.replace(epochs=0)
    with pytest.raises(TypeError, match="Unknown training settings: epoch, modle. Received: epoch=3, modle='rnn'"):
        TrainConfig.from_flat(modle="rnn", epoch=3)


def test_numpy_numbers_are_stored_as_python_ones_that_json_writes():
    import numpy as np

    config = TrainConfig.from_flat(epochs=np.int64(3), learning_rate=np.float32(0.5), overrides={"units": np.int64(8)})
    assert config == TrainConfig.from_flat(epochs=3, learning_rate=0.5, overrides={"units": 8})
    assert json.loads(json.dumps(config.flat()))["epochs"] == 3  # as results.json records it


def test_replace_takes_whole_sections_and_a_config_owns_its_overrides():
    overrides = {"units": 32}
    config = TrainConfig.from_flat(model="bahdanau", overrides=overrides)
    overrides["units"] = 0  # the caller's dict changes; the checked config does not
    assert config.model.overrides == {"units": 32}
    config.flat()["overrides"]["units"] = 0
    assert config.model.overrides == {"units": 32} and hash(config) == hash(TrainConfig.from_flat(**config.flat()))
    luong = config.replace(model=ModelConfig(kind="luong"), epochs=2)
    assert (luong.model.kind, luong.optimization.epochs, config.model.kind) == ("luong", 2, "bahdanau")
    assert DataConfig(dataset="files", train_files=["a", "b"]).train_files == ("a", "b")


def test_train_refuses_anything_but_a_train_config():
    with pytest.raises(TypeError, match="`train` takes a TrainConfig. Received: DataConfig"):
        recipe.train(DataConfig())


def test_sections_are_checked_alone_and_together():
    with pytest.raises(ValueError, match="epochs=0"):
        OptimizationConfig(epochs=0)
    with pytest.raises(ValueError, match="dropout=1.5"):
        ModelConfig(overrides={"dropout": 1.5})  # the range `--dropout` has
    with pytest.raises(ValueError, match="source='en', target='en'"):
        DataConfig(source="en", target="en")
    with pytest.raises(ValueError, match="--train-files takes SOURCE TARGET"):
        DataConfig(dataset="files", train_files=("only-one.txt",))
    with pytest.raises(ValueError, match="--share-embeddings is for the Transformer"):
        ModelConfig(kind="bahdanau", share_embeddings=True)
    # Across sections: the warm-up schedule's flags need a model trained with it, and sharing one vocabulary.
    with pytest.raises(ValueError, match="--lr-schedule is the Transformer's warm-up schedule"):
        TrainConfig(model=ModelConfig(kind="rnn"), optimization=OptimizationConfig(lr_schedule="cosine"))
    with pytest.raises(ValueError, match="--share-embeddings needs one vocabulary"):
        TrainConfig(model=ModelConfig(share_embeddings=True))
    TrainConfig(data=DataConfig(joint_vocabulary=True), model=ModelConfig(share_embeddings=True))
    with pytest.raises(TypeError, match="`optimization` must be of type OptimizationConfig. Received: optimization={}"):
        TrainConfig(optimization={})


def test_only_corpora_read_by_language_code_default_to_en_de():
    # The languages pick Multi30k's, WMT14's and TFDS's files; for the dates and the user's files they only
    # label the translator, which must not claim en->de for a corpus that is not.
    for dataset in ("multi30k", "wmt14", "tfds"):
        config = DataConfig(dataset=dataset)
        assert (config.source, config.target) == ("en", "de")
    reverse = DataConfig(source="de", target="en")
    assert (reverse.source, reverse.target, DataConfig(source="fr").target) == ("de", "en", "de")
    for dataset in ("dates", "tsv", "files"):
        assert (DataConfig(dataset=dataset).source, DataConfig(dataset=dataset).target) == (None, None)
    named = DataConfig(dataset="files", source="fr", target="en")
    assert (named.source, named.target) == ("fr", "en")
    assert TrainConfig.from_flat(dataset="dates").flat()["source"] is None


def test_each_kind_has_its_recipe_learning_rate():
    from keras_attention.base.options import MODEL_KINDS, RECIPE_LEARNING_RATES

    assert tuple(RECIPE_LEARNING_RATES) == MODEL_KINDS
    assert ModelConfig(kind="transformer").recipe_learning_rate == "warmup"
    assert {ModelConfig(kind=kind).recipe_learning_rate for kind in ("bahdanau", "luong", "rnn")} == {1e-3}


@pytest.mark.parametrize("path", sorted(glob.glob(str(RUNS / "*.json"))), ids=lambda p: Path(p).stem)
def test_the_recorded_runs_configs_load(path):
    """The `config` of every committed results.json (0.3's, some with fewer settings) builds the same run."""
    recorded = json.loads(Path(path).read_text(encoding="utf-8"))["config"]
    flat = TrainConfig.from_flat(**recorded).flat()
    assert {name: flat[name] for name in recorded} == {
        name: tuple(value) if name.endswith("_files") and value else value for name, value in recorded.items()}


def test_prepare_takes_the_data_section_only(tmp_path):
    from keras_attention.training.preparation import prepare

    with pytest.raises(TypeError, match=r"`prepare` takes a DataConfig \(a TrainConfig's is its `data`\). "
                                        "Received: TrainConfig"):
        prepare(TrainConfig(), str(tmp_path / "prepared"))
    assert not (tmp_path / "prepared").exists()
