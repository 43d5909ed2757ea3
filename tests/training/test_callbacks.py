"""`EpochTimer` logs each epoch's seconds, also into a CSVLogger placed after it; `StepTimer` finds the slow steps."""

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


def test_step_timer_sums_the_steps_far_above_the_median():
    from keras_attention.training.callbacks import StepTimer

    timer = StepTimer()
    timer.on_train_begin()
    timer.started -= 5.0  # fit began 5 s before the first step ended
    timer.first_step_seconds = None
    timer.durations = {"train": [4.0, 0.5, 0.5, 0.6, 3.0, 0.5], "test": [2.0, 0.2, 0.2]}
    timer._step_started = timer.started  # the first training step's own end sets the time to it
    # Train median 0.6 (the upper middle of six): 4.0 and 3.0 exceed 1.2 by 3.4 + 2.4; test median 0.2: 1.8.
    assert timer.summary()["seconds_beyond_median"] == round(3.4 + 2.4 + 1.8, 1)
    timer._end("train")
    assert timer.summary()["seconds_to_first_step"] >= 5.0


def test_step_timer_summary_before_any_step():
    """A resumed run whose backup holds every epoch never starts `fit`: the summary still works."""
    from keras_attention.training.callbacks import StepTimer

    assert StepTimer().summary() == {"seconds_to_first_step": None, "seconds_beyond_median": 0.0}


def _report_after_reading(tmp_path, lines, limit):
    """A `CorpusReport` after one pass over the first `limit` pairs of a `lines`-line corpus."""
    from keras_attention.data import CorpusReport
    from keras_attention.data.streaming import read_parallel_text

    source, target = tmp_path / "c.en", tmp_path / "c.de"
    source.write_text("".join(f"a {i}\n" for i in range(lines)), encoding="utf-8")
    target.write_text("".join(f"b {i}\n" for i in range(lines)), encoding="utf-8")
    report = CorpusReport()
    used = sum(1 for _ in read_parallel_text(str(source), str(target), report=report).take(limit))
    assert used == min(lines, limit)
    return report


def test_corpus_report_of_a_limited_pass_names_the_pairs_used(tmp_path, capsys):
    from keras_attention.training.callbacks import CorpusReportCallback

    report = _report_after_reading(tmp_path, 3000, 100)
    assert report.counts()["read"] > 100  # the reader ran ahead of the limit
    callback = CorpusReportCallback(report, limit=100)
    callback.on_epoch_end(0)
    assert "first pass: the first 100 pairs (max_train_examples); none dropped" in capsys.readouterr().out
    assert callback.counts == {"used": 100, "too_long_tokens": 0}


def test_corpus_report_of_a_corpus_below_the_limit_is_the_readers(tmp_path, capsys):
    from keras_attention.training.callbacks import CorpusReportCallback

    report = _report_after_reading(tmp_path, 50, 100)
    callback = CorpusReportCallback(report, limit=100)
    callback.on_epoch_end(0)
    assert "first pass: read 50 pairs, kept 50; none skipped" in capsys.readouterr().out
    assert callback.counts["kept"] == 50
