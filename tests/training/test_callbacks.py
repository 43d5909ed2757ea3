"""`EpochTimer` logs each epoch's seconds, also into a CSVLogger placed after it."""

import csv
import time

import keras
import numpy as np

from keras_attention.training.callbacks import EpochTimer


class _Slow(keras.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.seconds)


def test_epoch_timer_logs_seconds_per_epoch_into_history_and_csv(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.zeros((8, 2), "float32"), np.zeros((8, 1), "float32")
    path = tmp_path / "history.csv"
    started = time.perf_counter()
    history = model.fit(x, y, batch_size=2, epochs=2, verbose=0,  # 4 steps of >= 0.05 s each epoch
                        callbacks=[_Slow(0.05), EpochTimer(), keras.callbacks.CSVLogger(str(path))])
    elapsed = time.perf_counter() - started
    seconds = history.history["epoch_seconds"]
    assert len(seconds) == 2 and all(s >= 4 * 0.05 for s in seconds) and sum(seconds) <= elapsed
    with open(path, newline="") as f:
        logged = [float(row["epoch_seconds"]) for row in csv.DictReader(f)]
    np.testing.assert_allclose(logged, seconds, rtol=1e-6)
