"""Resumable training: back up every N steps, and after a kill go on from the backup.

Keras' `BackupAndRestore` (3.15) can save every N steps, but on restart it
begins the saved epoch again from its first batch, with the weights of the
middle of that epoch: the steps before the backup are done twice, the
learning-rate schedule runs ahead, and the run ends with more steps than an
uninterrupted one. `ResumableBackup` records how many steps the backup holds,
and `fit_resumable` first finishes the interrupted epoch with just the steps
it was missing, then runs the remaining epochs.
"""

import csv
import math
import os
import shutil

import h5py
import keras
import tensorflow as tf

from keras_attention.base.files import replaced_atomically, write_json
from keras_attention.models.optimizer_build import build_optimizer

STEPS_ATTRIBUTE = "completed_steps"
EPOCHS_ATTRIBUTE = "completed_epochs"


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """A `BackupAndRestore` that knows where in the epoch it stopped.

    Every `save_freq` steps and at the end of every epoch it writes the model
    and optimizer state to `backup_dir/latest.weights.h5`, with the number of
    completed training steps stored in that same file, so weights and step
    count always agree. Files are written under another name and then renamed,
    so a kill during a save leaves the previous backup whole. A copy of the
    step count goes to `training_metadata.json` for people and scripts.

    Restoring is explicit (`restore()`, which `fit_resumable` calls before
    `fit`), because the caller must know the step to shape the first epoch.
    The backup is kept when `fit` ends; `delete()` removes it.

    Args:
        backup_dir: str. A folder for this run's backup only.
        save_freq: "epoch" or int. Back up every `save_freq` steps (and at
            each epoch end), or at epoch ends only. Defaults to "epoch".

    Example:

    >>> backup = ResumableBackup("runs/x/backup", save_freq=200)  # doctest: +SKIP
    >>> backup.set_model(model); backup.restore()  # doctest: +SKIP
    >>> history = fit_resumable(model, train_ds, 10, 500, backup)  # doctest: +SKIP
    """

    def __init__(self, backup_dir, save_freq="epoch"):
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int)
                                     or save_freq < 1):
            raise ValueError(f"`save_freq` must be 'epoch' or a positive int. Received: save_freq={save_freq!r}")
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=False)
        self.completed_steps = 0
        self.completed_epochs = 0
        self._epoch_start_step = 0

    def restore(self):
        """Load the backup into the model, if there is one; return the completed steps (0 if none)."""
        self.completed_steps = self.completed_epochs = 0
        if not os.path.exists(self._weights_path):
            return 0
        build_optimizer(self.model)  # its variables must exist to be loaded
        self.model.load_weights(self._weights_path)
        with h5py.File(self._weights_path, "r") as f:
            self.completed_steps = int(f.attrs[STEPS_ATTRIBUTE])
            self.completed_epochs = int(f.attrs.get(EPOCHS_ATTRIBUTE, 0))
        return self.completed_steps

    def delete(self):
        """Remove the backup folder (at the end of a finished run)."""
        shutil.rmtree(self.backup_dir, ignore_errors=True)

    def on_train_begin(self, logs=None):
        pass  # restored by `restore()` before `fit`

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_step = self.completed_steps

    def on_train_batch_end(self, batch, logs=None):
        self.completed_steps = self._epoch_start_step + batch + 1
        super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.completed_epochs = epoch + 1
        super().on_epoch_end(epoch, logs)  # saves when save_freq == "epoch"
        if self.save_freq != "epoch":
            self._save_model()

    def on_train_end(self, logs=None):
        pass  # keep the backup: `fit_resumable` may call `fit` again

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        with replaced_atomically(self._weights_path) as partial:
            self.model.save_weights(partial, overwrite=True)
            with h5py.File(partial, "a") as f:
                f.attrs[STEPS_ATTRIBUTE] = self.completed_steps
                f.attrs[EPOCHS_ATTRIBUTE] = self.completed_epochs
        write_json(self._training_metadata_path,
                   {STEPS_ATTRIBUTE: self.completed_steps, EPOCHS_ATTRIBUTE: self.completed_epochs})


def fit_resumable(model, dataset, epochs, steps_per_epoch, backup, callbacks=(), **fit_kwargs):
    """`model.fit` for `epochs` epochs that goes on from `backup` after an interruption.

    If the backup holds `k` steps, `k = e * steps_per_epoch + r`, it runs
    epoch `e` with only its `steps_per_epoch - r` missing steps (a fresh pass
    over `dataset` that skips its first `r` batches), then epochs `e + 1 ...`.
    The optimizer and the learning-rate schedule continue from step `k`, and
    the finished run has done `epochs * steps_per_epoch` steps, as an
    uninterrupted one. Without shuffling it sees the same batches too; with
    shuffling, the rest of epoch `e` comes from a new shuffle of the data.

    With `steps_per_epoch` known, `fit` gets `dataset.repeat()` and reads it
    through one iterator for the whole run, each epoch one pass. A new
    iterator each epoch would cost up to a minute of idle time at every
    epoch's end: deleting a `tf.data` iterator waits for its autotuning
    thread, which sleeps up to 60 s between rounds (seen in TensorFlow 2.21
    as epochs of a Multi30k Transformer taking 141 s instead of 88 s).

    With `steps_per_epoch=None` (a streamed corpus whose number of batches
    is known only once it has been read), an epoch is one pass and a resumed
    run starts again at the beginning of the epoch it was in, with the
    weights and optimizer of the latest backup: the batches of that epoch
    read before the kill are read again.

    Args:
        model: a compiled, built `keras.Model`.
        dataset: the training `tf.data.Dataset` (one epoch per pass).
        epochs: int. Total epochs of the run.
        steps_per_epoch: int or None. Batches in one pass over `dataset`.
        backup: a `ResumableBackup` whose `restore()` has been called.
        callbacks: other callbacks for `fit`.
        **fit_kwargs: more `fit` arguments (`validation_data`, `verbose`, ...); `shuffle` is False unless
            given (the dataset shuffles itself, and Keras warns that it ignores `shuffle=True` for one).

    Returns:
        A dict like `History.history`, for the epochs run by this call.
    """
    check_backup_fits(backup, epochs, steps_per_epoch)
    if steps_per_epoch is None:
        epoch, offset = backup.completed_epochs, 0
    else:
        epoch, offset = divmod(backup.completed_steps, steps_per_epoch)
    callbacks = [*callbacks, backup]  # last: an epoch counts as done once all else has run
    history = {}

    def run(data, first_epoch, last_epoch, steps_in_epoch=steps_per_epoch):
        if first_epoch >= last_epoch:
            return
        # Epochs of a known length read one repeated pass after another through one iterator (see
        # above); a streamed corpus' epoch is one pass, however long, through an iterator of its own.
        infinite = int(data.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
        if steps_in_epoch is not None and not infinite and last_epoch - first_epoch > 1:
            data, infinite = data.repeat(), True
        steps = {"steps_per_epoch": steps_in_epoch} if infinite else {}
        result = model.fit(data, initial_epoch=first_epoch, epochs=last_epoch,
                           callbacks=callbacks, **{"shuffle": False, **steps, **fit_kwargs})  # datasets shuffle
        for name, values in result.history.items():
            history.setdefault(name, []).extend(values)

    quiet = not fit_kwargs.get("verbose", "auto")  # as `fit`: 0 prints nothing
    if backup.completed_steps and steps_per_epoch is None and not quiet:
        print(f"Resuming from the backup in {backup.backup_dir}: {backup.completed_steps} steps done; "
              f"epoch {epoch + 1} starts again from its first batch.")
    elif backup.completed_steps and not quiet:
        print(f"Resuming from the backup in {backup.backup_dir}: {backup.completed_steps} steps done "
              f"(epoch {epoch + 1}, step {offset} of {steps_per_epoch}).")
    if offset:
        run(dataset.skip(offset), epoch, min(epoch + 1, epochs), steps_per_epoch - offset)
        epoch += 1
        if model.stop_training:  # a callback ended the run (`TimeLimit`, `TerminateOnNaN`)
            return history
    run(dataset, epoch, epochs)
    return history


def check_backup_fits(backup, epochs, steps_per_epoch):
    """Raise `ValueError` if `backup` already holds more steps than `epochs` epochs have.

    Such a run would train nothing and report the longer run as the shorter
    one; the message says how many epochs the backup holds.
    """
    if steps_per_epoch is None:
        if backup.completed_epochs > epochs:
            raise ValueError(
                f"The backup in {backup.backup_dir!r} holds {backup.completed_epochs} epochs, more than "
                f"epochs={epochs} asks for. Ask for at least {backup.completed_epochs} epochs, or remove "
                "the backup folder to train from the start.")
        return
    if backup.completed_steps > epochs * steps_per_epoch:
        raise ValueError(
            f"The backup in {backup.backup_dir!r} holds {backup.completed_steps} training steps "
            f"({backup.completed_steps / steps_per_epoch:g} epochs of {steps_per_epoch} steps), more than "
            f"epochs={epochs} asks for. Ask for at least {math.ceil(backup.completed_steps / steps_per_epoch)} "
            "epochs, or remove the backup folder to train from the start.")


def read_csv_history(path):
    """A `CSVLogger` file as `{name: [value per epoch]}`, all runs of a resumed job together.

    If an epoch was logged twice (a kill between its log line and its
    backup makes the restarted run log it again), the later line wins.
    """
    if not os.path.exists(path):
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        rows = {int(row["epoch"]): row for row in csv.DictReader(f)}
    history = {}
    for epoch in sorted(rows):
        for name, value in rows[epoch].items():
            if name != "epoch":
                history.setdefault(name, []).append(_number(value))
    return history


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return text
