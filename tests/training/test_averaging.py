"""Checkpoint averaging: of identical checkpoints, the same weights; of different ones, their mean."""

import json
import os

import keras
import numpy as np
import pytest

from keras_attention import cli
from keras_attention.base import files
from keras_attention.models import Transformer
from keras_attention.training import averaging
from keras_attention.training.callbacks import EpochCheckpoints


def _model(seed, target_vocabulary=31):
    keras.utils.set_random_seed(seed)
    model = Transformer(30, target_vocabulary, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32,
                        max_length=12)
    model((np.ones((1, 5), "int32"), np.ones((1, 4), "int32")))
    model.compile("adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _save_three(tmp_path, suffix=".weights.h5"):
    paths = []
    for seed in (1, 2, 3):
        model = _model(seed)
        path = str(tmp_path / f"seed{seed}{suffix}")
        model.save_weights(path) if suffix == ".weights.h5" else model.save(path)
        paths.append(path)
    return paths


# What `average_translator` reads of translator.json: its keys (the values are not looked at).
TRANSLATOR_JSON = json.dumps({key: {} for key in files.TRANSLATOR_KEYS})


def _translator(folder, model):
    """A translator folder for averaging: `model` saved as its `model.keras` beside a translator.json."""
    folder.mkdir()
    model.save(str(folder / "model.keras"))
    (folder / "translator.json").write_text(TRANSLATOR_JSON)
    return folder


def test_average_of_identical_checkpoints_is_the_same_weights(tmp_path):
    model = _model(1)
    model.save_weights(str(tmp_path / "a.weights.h5"))
    out = averaging.average_checkpoints([str(tmp_path / "a.weights.h5")] * 4, str(tmp_path / "avg.weights.h5"))
    again = _model(9)
    again.load_weights(out)
    for a, b in zip(again.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_average_of_different_checkpoints_is_their_mean(tmp_path):
    paths = _save_three(tmp_path)
    out = averaging.average_checkpoints(paths, str(tmp_path / "avg.weights.h5"))
    models = [_model(9) for _ in paths]
    for m, p in zip(models, paths):
        m.load_weights(p)
    averaged = _model(9)
    averaged.load_weights(out)
    assert len(averaged.get_weights()) == len(models[0].get_weights())
    for i, weight in enumerate(averaged.get_weights()):
        np.testing.assert_allclose(weight, np.mean([m.get_weights()[i] for m in models], axis=0),
                                   rtol=1e-6, atol=1e-7)
    assert set(averaging.read_weights(out)) == set(averaging.average_weights(paths))


def test_average_of_keras_files_loads_as_a_model(tmp_path):
    paths = _save_three(tmp_path, suffix=".keras")
    out = averaging.average_checkpoints(paths, str(tmp_path / "avg.keras"))
    loaded = keras.models.load_model(out)
    originals = [keras.models.load_model(p) for p in paths]
    for i, weight in enumerate(loaded.get_weights()):
        np.testing.assert_allclose(weight, np.mean([m.get_weights()[i] for m in originals], axis=0),
                                   rtol=1e-6, atol=1e-7)


def test_averaging_checks_its_inputs(tmp_path):
    paths = _save_three(tmp_path)
    with pytest.raises(ValueError, match="paths=\\[\\]"):
        averaging.average_checkpoints([], str(tmp_path / "x.weights.h5"))
    with pytest.raises(ValueError, match="model.h5"):
        averaging.average_checkpoints(paths, str(tmp_path / "model.h5"))
    with pytest.raises(ValueError, match="needs a `.keras` checkpoint"):
        averaging.average_checkpoints(paths, str(tmp_path / "x.keras"))
    keras.utils.set_random_seed(1)
    other = Transformer(30, 31, num_layers=2, d_model=16, num_heads=2, intermediate_dim=32, max_length=12)
    other((np.ones((1, 5), "int32"), np.ones((1, 4), "int32")))
    other.save_weights(str(tmp_path / "other.weights.h5"))
    with pytest.raises(ValueError, match="same weights"):
        averaging.average_weights([paths[0], str(tmp_path / "other.weights.h5")])
    with pytest.raises(FileNotFoundError):
        averaging.average_weights([str(tmp_path / "missing.weights.h5")])


def test_epoch_checkpoints_keep_the_last_n(tmp_path):
    x = np.ones((4, 3), "float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    saver = EpochCheckpoints(str(tmp_path / "ckpt"), keep=2)
    model.fit(x, x[:, :1], epochs=11, verbose=0, callbacks=[saver])
    assert [os.path.basename(p) for p in saver.checkpoints()] == ["epoch-010.weights.h5", "epoch-011.weights.h5"]
    with pytest.raises(ValueError, match="keep=0"):
        EpochCheckpoints(str(tmp_path), keep=0)


def test_cli_average_checkpoints(tmp_path, capsys):
    paths = _save_three(tmp_path)
    out = str(tmp_path / "cli.weights.h5")
    assert cli.main(["average-checkpoints", *paths, "--output", out]) == 0
    assert "average of 3 checkpoints" in capsys.readouterr().out
    expected = averaging.average_weights(paths)
    for name, value in averaging.read_weights(out).items():
        np.testing.assert_array_equal(value, expected[name])
    assert cli.main(["average-checkpoints", *paths, "--output", str(tmp_path / "x.txt")]) == 2
    assert "x.txt" in capsys.readouterr().err


def test_cli_average_into_a_translator_folder(tmp_path):
    paths = _save_three(tmp_path)
    translator = _translator(tmp_path / "translator", _model(4))
    out = tmp_path / "averaged"
    assert cli.main(["average-checkpoints", *paths, "--output", str(out), "--translator", str(translator)]) == 0
    assert (out / "translator.json").read_text() == TRANSLATOR_JSON
    loaded = keras.models.load_model(str(out / "model.keras"))
    reference = _model(9)
    reference.load_weights(averaging.average_checkpoints(paths, str(tmp_path / "avg.weights.h5")))
    for a, b in zip(loaded.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_average_translator_needs_a_model_and_writes_nothing_without_one(tmp_path):
    paths = _save_three(tmp_path)
    out = tmp_path / "averaged"
    with pytest.raises(FileNotFoundError, match="translator.json' is missing"):
        averaging.average_translator(str(tmp_path), paths, str(out))
    (tmp_path / "translator.json").write_text(TRANSLATOR_JSON)
    with pytest.raises(FileNotFoundError, match="model.keras"):
        averaging.average_translator(str(tmp_path), paths, str(out))
    assert not out.exists()


def test_checkpoints_of_another_model_leave_the_output_as_it_was(tmp_path, capsys):
    # Checkpoints of a model with a smaller output vocabulary (31) than the translator's (45): one line, nothing
    # written.
    paths = _save_three(tmp_path)
    other = _translator(tmp_path / "other", _model(4, target_vocabulary=45))
    out = _translator(tmp_path / "averaged", _model(5))  # a translator already there, kept
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert cli.main(["average-checkpoints", *paths, "--output", str(out), "--translator", str(other),
                     "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "has shape (31, 16) in the checkpoints but (45, 16) in" in err and "of another model" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert cli.main(["average-checkpoints", *paths, "--output", str(tmp_path / "new"), "--translator",
                     str(other)]) == 2
    assert not (tmp_path / "new").exists()
    capsys.readouterr()
    assert cli.main(["average-checkpoints", *paths, "--output", paths[0], "--overwrite"]) == 2
    assert "is one of the checkpoints to average" in capsys.readouterr().err


def test_an_existing_output_is_kept_unless_overwrite(tmp_path, capsys):
    paths = _save_three(tmp_path)
    out = tmp_path / "avg.weights.h5"
    out.write_bytes(b"someone's weights")
    assert cli.main(["average-checkpoints", *paths, "--output", str(out)]) == 2
    assert "avg.weights.h5 already exists" in capsys.readouterr().err
    assert out.read_bytes() == b"someone's weights"
    assert cli.main(["average-checkpoints", *paths, "--output", str(out), "--overwrite"]) == 0
    _model(9).load_weights(str(out))
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    translator = _translator(tmp_path / "translator", _model(4))
    with pytest.raises(ValueError, match="translator already holds a translator"):
        averaging.average_translator(str(translator), paths, str(translator))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    with pytest.raises(ValueError, match="notes is not empty and holds no translator"):
        averaging.average_translator(str(translator), paths, str(notes), overwrite=True)
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]
    averaged = averaging.average_translator(str(translator), paths, str(tmp_path / "averaged"))
    (tmp_path / "averaged" / "todo.txt").write_text("keep me")  # beside a translator: not ours to delete
    with pytest.raises(ValueError, match="averaged is not empty and holds no translator"):
        averaging.average_translator(str(translator), paths, averaged, overwrite=True)
    assert sorted(p.name for p in (tmp_path / "averaged").iterdir()) == ["model.keras", "todo.txt", "translator.json"]


def test_a_translator_that_fails_half_way_leaves_the_old_one_whole(tmp_path, monkeypatch):
    paths = _save_three(tmp_path)
    translator = _translator(tmp_path / "translator", _model(4))
    out = _translator(tmp_path / "averaged", _model(5))  # replaced with overwrite, once the new one is complete
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def disk_full(members, path):
        open(path, "wb").write(b"half a model")
        raise OSError("No space left on device")

    monkeypatch.setattr(averaging, "_write_keras_file", disk_full)
    with pytest.raises(OSError, match="No space left"):
        averaging.average_translator(str(translator), paths, str(out), overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["averaged", "translator"]
    monkeypatch.undo()
    averaging.average_translator(str(translator), paths, str(out), overwrite=True)
    assert (out / "model.keras").read_bytes() != before["model.keras"]
