"""Backups every N steps and mid-epoch resumption; the CLI killed with SIGKILL and run again."""

import json
import os
import signal
import time

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.training.fault_tolerance import ResumableBackup, fit_resumable, read_csv_history
from tests.training import subprocesses

STEPS, EPOCHS = 5, 3


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * 4, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(4)  # not shuffled: same batches each run


def _model():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    return model


class _Interrupt(keras.callbacks.Callback):
    """Raise after `at` steps, as a kill would stop the process."""

    def __init__(self, at):
        super().__init__()
        self.at, self.seen = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.at:
            raise KeyboardInterrupt


class _Recorder(keras.Sequential):
    """A model that keeps the first input column of every batch it trains on (eager only)."""

    seen = []

    def train_step(self, data):
        self.seen.append(np.asarray(data[0])[:, 0].copy())
        return super().train_step(data)


def test_every_epoch_is_one_fresh_pass_read_through_one_iterator(tmp_path, monkeypatch):
    """Epochs of a known length read a repeated dataset through one iterator (deleting a tf.data
    iterator can wait up to a minute for its autotuning thread), and still each epoch is one
    whole pass over the data, shuffled anew."""
    iterators = []
    make_iterator = tf.data.Dataset.__iter__
    monkeypatch.setattr(tf.data.Dataset, "__iter__",
                        lambda self: iterators.append(self) or make_iterator(self))
    rows = np.arange(STEPS * 4, dtype="float32")[:, None] * np.ones((1, 3), "float32")
    data = tf.data.Dataset.from_tensor_slices((rows, rows[:, :1])).shuffle(len(rows), seed=1).batch(4)
    keras.utils.set_random_seed(3)
    model = _Recorder([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(1e-3), loss="mse", run_eagerly=True)
    _Recorder.seen = []
    backup = ResumableBackup(str(tmp_path / "backup"))
    backup.set_model(model)
    backup.restore()
    fit_resumable(model, data, EPOCHS, STEPS, backup, verbose=0)

    assert len(iterators) == 1
    epochs = [np.concatenate(_Recorder.seen[e * STEPS:(e + 1) * STEPS]) for e in range(EPOCHS)]
    assert len(_Recorder.seen) == EPOCHS * STEPS
    for rows_seen in epochs:
        assert sorted(rows_seen.tolist()) == list(range(STEPS * 4))  # each row once an epoch
    assert any(not np.array_equal(epochs[0], other) for other in epochs[1:])  # shuffled anew


def test_resumes_mid_epoch_with_the_same_steps_and_weights(tmp_path):
    reference = _model()
    reference.fit(_data(), epochs=EPOCHS, verbose=0, shuffle=False)

    model = _model()
    backup = ResumableBackup(str(tmp_path / "backup"), save_freq=2)
    backup.set_model(model)
    assert backup.restore() == 0
    with pytest.raises(KeyboardInterrupt):  # at step 8, in epoch 2
        fit_resumable(model, _data(), EPOCHS, STEPS, backup, [_Interrupt(at=8)], verbose=0)
    metadata = json.loads((tmp_path / "backup" / "training_metadata.json").read_text())
    assert metadata["completed_steps"] == 6  # backups held 2, 4, 5 (epoch end), then 6 steps

    restarted = _model()  # a new process: fresh weights, then the backup
    backup = ResumableBackup(str(tmp_path / "backup"), save_freq=2)
    backup.set_model(restarted)
    assert backup.restore() == 6
    history = fit_resumable(restarted, _data(), EPOCHS, STEPS, backup, verbose=0)
    assert len(history["loss"]) == 2  # the rest of epoch 2, then epoch 3
    assert backup.completed_steps == EPOCHS * STEPS
    assert int(restarted.optimizer.iterations) == int(reference.optimizer.iterations) == EPOCHS * STEPS
    for a, b in zip(restarted.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with h5py.File(tmp_path / "backup" / "latest.weights.h5", "r") as f:
        assert int(f.attrs["completed_steps"]) == EPOCHS * STEPS
    backup.delete()
    assert not (tmp_path / "backup").exists()


def test_backup_at_an_epoch_end_starts_the_next_epoch(tmp_path):
    model = _model()
    backup = ResumableBackup(str(tmp_path / "backup"))  # epoch ends only
    backup.set_model(model)
    with pytest.raises(KeyboardInterrupt):
        fit_resumable(model, _data(), EPOCHS, STEPS, backup, [_Interrupt(at=STEPS + 2)], verbose=0)
    again = _model()
    backup = ResumableBackup(str(tmp_path / "backup"))
    backup.set_model(again)
    assert backup.restore() == STEPS
    history = fit_resumable(again, _data(), EPOCHS, STEPS, backup, verbose=0)
    assert len(history["loss"]) == EPOCHS - 1 and int(again.optimizer.iterations) == EPOCHS * STEPS


def test_fit_resumable_refuses_fewer_epochs_than_the_backup_holds(tmp_path):
    model = _model()
    backup = ResumableBackup(str(tmp_path / "backup"))
    backup.set_model(model)
    fit_resumable(model, _data(), 2, STEPS, backup, verbose=0)
    weights = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match=f"holds {2 * STEPS} training steps .*epochs=1 .*at least 2"):
        fit_resumable(model, _data(), 1, STEPS, backup, verbose=0)
    for before, after in zip(weights, model.get_weights()):
        np.testing.assert_array_equal(before, after)  # nothing trained
    assert len(fit_resumable(model, _data(), 2, STEPS, backup, verbose=0)) == 0  # exactly done: nothing to run


def test_backup_checks_save_freq(tmp_path):
    for bad in (0, -3, 2.5, True, "step"):
        with pytest.raises(ValueError, match="save_freq"):
            ResumableBackup(str(tmp_path), save_freq=bad)


def test_read_csv_history_keeps_the_last_line_of_an_epoch(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss,val_loss\n0,2.0,2.5\n1,1.5,2.0\n1,1.4,1.9\n2,1.0,NA\n")
    assert read_csv_history(str(path)) == {"loss": [2.0, 1.4, 1.0], "val_loss": [2.5, 1.9, "NA"]}
    assert read_csv_history(str(tmp_path / "missing.csv")) == {}


# `_train_command`'s: 320 dates in batches of 16 drawn by length bucket (each bucket ends with a partial one).
TRAIN_STEPS_PER_EPOCH = 24


def _train_command(output):
    """The smallest run that has several backups in every epoch: 24 steps an epoch, a backup every 3."""
    return ["-m", "keras_attention.cli", "train", "--model", "transformer", "--preset", "tiny",
            "--num-layers", "1", "--d-model", "32", "--num-heads", "2", "--intermediate-dim", "64",
            "--dataset", "dates", "--vocab-size", "200", "--max-length", "32", "--epochs", "3",
            "--batch-size", "16", "--max-train-examples", "320", "--max-test-examples", "20",
            "--no-jit", "--seed", "1", "--bleu-sample", "0",
            "--backup-every-steps", "3", "--keep-checkpoints", "3", "--output", str(output), "--resume"]


def _iterations(translator_dir):
    """The optimizer's step counter saved with the translator's model."""
    import io
    import zipfile

    with zipfile.ZipFile(os.path.join(translator_dir, "model.keras")) as archive:
        with h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r") as f:
            return int(f["optimizer/vars/0"][()])


def _run_to_end(args, capsys):
    """`keras-attention train ...` in this process (a process of its own is not what is tested): code, output."""
    from keras_attention.cli import main

    assert args[:2] == ["-m", "keras_attention.cli"]
    code = main(args[2:])
    out, err = capsys.readouterr()
    return code, out + err


def test_cli_killed_mid_epoch_resumes_and_ends_like_an_uninterrupted_run(tmp_path, capsys):
    # An uninterrupted run ends after 3 epochs of TRAIN_STEPS_PER_EPOCH steps, its optimizer at 3 times that.
    steps_per_epoch = TRAIN_STEPS_PER_EPOCH

    # Kill the run with SIGKILL once a backup inside epoch 2 exists.
    output = tmp_path / "killed"
    metadata = output / "backup" / "training_metadata.json"
    killed = subprocesses.start(_train_command(output), tmp_path / "killed.log")
    deadline, backed_up = time.monotonic() + 600, 0
    try:
        while time.monotonic() < deadline and killed.poll() is None:
            try:
                backed_up = json.loads(metadata.read_text())["completed_steps"]
            except (OSError, ValueError, KeyError):
                backed_up = 0
            if backed_up > steps_per_epoch and backed_up % steps_per_epoch:
                break
            time.sleep(0.02)
    finally:
        subprocesses.kill(killed, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL, subprocesses.logs([killed])
    history_before = (output / "history.csv").read_text()
    checkpoints_before = sorted(os.listdir(output / "checkpoints"))
    assert history_before.count("\n") >= 2 and checkpoints_before  # epoch 1 was logged and saved

    # The same command again, in this process: what is tested is that it resumes, not how it starts.
    code, log = _run_to_end(_train_command(output), capsys)
    assert code == 0, log
    results = json.loads((output / "results.json").read_text())
    assert results["steps_per_epoch"] == steps_per_epoch  # the constant the kill above was timed by
    resumed = results["resumed_from_step"]
    assert resumed >= backed_up and resumed % steps_per_epoch, resumed  # resumed mid-epoch
    assert "Resuming from the backup" in log
    assert results["steps"] == _iterations(output / "translator") == 3 * steps_per_epoch
    assert results["test"]["num_sentences"] == 20  # --max-test-examples
    assert (output / "history.csv").read_text().startswith(history_before)  # nothing lost
    assert len(results["history"]["loss"]) == 3
    # The training time covers both processes: the epochs logged before the kill count too.
    assert results["train_seconds"] == round(sum(results["history"]["epoch_seconds"]), 1)
    assert sorted(os.listdir(output / "checkpoints"))[-1] == "epoch-003.weights.h5"
    assert not (output / "backup").exists()  # a finished run removes its backup


def test_cli_keep_backup_extends_a_finished_run_with_more_epochs(tmp_path, capsys):
    output = tmp_path / "run"
    command = [*_train_command(output), "--keep-backup", "--warmup-steps", "20"]
    epochs_at = command.index("--epochs") + 1

    command[epochs_at] = "1"
    code, log = _run_to_end(command, capsys)
    assert code == 0, log
    first = json.loads((output / "results.json").read_text())
    steps_per_epoch = first["steps_per_epoch"]
    assert first["steps"] == steps_per_epoch
    assert (output / "backup").is_dir()  # kept

    # Killed after its last epoch's backup, before the results: the same command finishes it
    # without training (and keeps the backup until the results are written).
    os.remove(output / "results.json")
    code, log = _run_to_end(command, capsys)
    assert code == 0 and "Traceback" not in log, log
    again = json.loads((output / "results.json").read_text())
    assert again["resumed_from_step"] == again["steps"] == steps_per_epoch and "test" in again
    assert _iterations(output / "translator") == steps_per_epoch
    history_before = (output / "history.csv").read_text()

    command[epochs_at] = "2"
    code, log = _run_to_end(command, capsys)
    assert code == 0, log
    assert "Resuming from the backup" in log
    second = json.loads((output / "results.json").read_text())
    assert second["resumed_from_step"] == steps_per_epoch
    assert second["steps"] == 2 * steps_per_epoch
    assert _iterations(output / "translator") == 2 * steps_per_epoch  # the optimizer went on, not restarted
    assert len(second["history"]["loss"]) == 2
    assert (output / "history.csv").read_text().startswith(history_before)
    assert sorted(os.listdir(output / "checkpoints")) == ["epoch-001.weights.h5", "epoch-002.weights.h5"]

    # Fewer epochs than the backup holds: a clear error, and the backup is left alone.
    command[epochs_at] = "1"
    code, log = _run_to_end(command, capsys)
    assert code == 2, log
    assert f"holds {2 * steps_per_epoch} training steps" in log and "epochs=1" in log
    assert "Traceback" not in log
    metadata = json.loads((output / "backup" / "training_metadata.json").read_text())
    assert metadata["completed_steps"] == 2 * steps_per_epoch
    assert _iterations(output / "translator") == 2 * steps_per_epoch  # the finished run's translator is intact


def test_ctrl_c_stops_with_one_line_and_a_whole_backup(tmp_path):
    output = tmp_path / "run"
    metadata = output / "backup" / "training_metadata.json"
    command = [*_train_command(output)]
    command[command.index("--epochs") + 1] = "50"
    process = subprocesses.start(command, tmp_path / "run.log")
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and process.poll() is None and not metadata.exists():
            time.sleep(0.05)
        time.sleep(1.0)  # inside training, between or during backups
        os.killpg(process.pid, signal.SIGINT)
        code = subprocesses.finish([process], timeout=120)[0]
    finally:
        subprocesses.kill(process)
    log = open(tmp_path / "run.log", errors="replace").read()
    assert code == 130, log[-3000:]
    assert "Traceback" not in log
    last = log.strip().splitlines()[-1]
    assert last == (f"keras-attention train: interrupted; the last backup is in {output / 'backup'}: "
                    "run the same command with --resume to continue."), last
    assert not [name for name in os.listdir(output / "backup") if "partial" in name]
    assert not [name for name in os.listdir(output / "translator") if "partial" in name]
    assert json.loads(metadata.read_text())["completed_steps"] > 0


class _StopAfterEpoch(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        self.model.stop_training = True


def test_a_callback_that_stops_the_rest_of_a_resumed_epoch_ends_the_run(tmp_path):
    """Resumed mid-epoch, the epoch's rest is one `fit` and the later epochs another: a stop (a time limit,
    a NaN) in the first must not start the second."""
    model = _model()
    backup = ResumableBackup(str(tmp_path / "backup"), save_freq=2)
    backup.set_model(model)
    with pytest.raises(KeyboardInterrupt):
        fit_resumable(model, _data(), EPOCHS, STEPS, backup, [_Interrupt(at=3)], verbose=0)
    again = _model()
    backup = ResumableBackup(str(tmp_path / "backup"), save_freq=2)
    backup.set_model(again)
    assert backup.restore() == 2
    history = fit_resumable(again, _data(), EPOCHS, STEPS, backup, [_StopAfterEpoch()], verbose=0)
    assert len(history["loss"]) == 1 and int(again.optimizer.iterations) == STEPS  # the first epoch's end
