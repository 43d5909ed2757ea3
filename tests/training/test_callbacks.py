"""`EpochTimer` logs each epoch's seconds and its validation's, also into a CSVLogger placed after it; `StepTimer`
finds the slow steps; `EpochLine` keeps the times and BLEU out of Keras' line; `TimeLimit` stops a run before
the epoch that would end past its budget."""

import csv
import time

import keras
import numpy as np
import pytest

from keras_attention.training.callbacks import EpochLine, EpochTimer


class _Sleep(keras.callbacks.Callback):
    """Sleeps after each training step (`train` seconds) and each validation step (`test` seconds)."""

    def __init__(self, train=0.0, test=0.0):
        super().__init__()
        self.train, self.test = train, test

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(self.train)

    def on_test_batch_end(self, batch, logs=None):
        time.sleep(self.test)


def test_epoch_timer_logs_seconds_per_epoch_into_history_and_csv(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.zeros((8, 2), "float32"), np.zeros((8, 1), "float32")
    path = tmp_path / "history.csv"
    started = time.perf_counter()
    history = model.fit(x, y, batch_size=2, epochs=2, verbose=0,  # 4 steps of >= 0.05 s each epoch
                        callbacks=[_Sleep(train=0.05), EpochTimer(), keras.callbacks.CSVLogger(str(path))])
    elapsed = time.perf_counter() - started
    seconds = history.history["epoch_seconds"]
    assert len(seconds) == 2 and all(s >= 4 * 0.05 for s in seconds) and sum(seconds) <= elapsed
    with open(path, newline="") as f:
        logged = [float(row["epoch_seconds"]) for row in csv.DictReader(f)]
    np.testing.assert_allclose(logged, seconds, rtol=1e-6)


def test_epoch_timer_logs_the_validation_passes_share_of_the_epoch():
    """Validation sleeps 3 x 0.1 s and training 4 x 0.5 s: the validation part holds the first and not the
    second, the epoch both; without validation data the part is 0."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.zeros((8, 2), "float32"), np.zeros((8, 1), "float32")
    history = model.fit(x, y, batch_size=2, epochs=1, verbose=0, validation_data=(x[:6], y[:6]),
                        callbacks=[_Sleep(train=0.5, test=0.1), EpochTimer()])
    [validation], [epoch] = history.history["validation_seconds"], history.history["epoch_seconds"]
    assert 0.3 <= validation < 2.0
    assert epoch >= validation + 2.0
    timer = EpochTimer()
    model.evaluate(x, y, verbose=0, callbacks=[timer])  # outside `fit`: no epoch, and no error
    history = model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[timer])
    assert history.history["validation_seconds"] == [0.0]


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


def test_corpus_report_of_a_source_that_counts_no_lines_gives_the_drops_only(capsys):
    from keras_attention.data import CorpusReport
    from keras_attention.training.callbacks import CorpusReportCallback

    report = CorpusReport()  # as the generated dates leave it: no line read, 60 pairs too long
    report.add("too_long_tokens", 60)
    CorpusReportCallback(report, limit=256).on_epoch_end(0)
    assert capsys.readouterr().out.strip() == ("Training data, first pass: 60 pairs dropped with more tokens than "
                                               "the maximum length")


class _ScriptedTimes(keras.callbacks.Callback):
    """Stands in for `EpochTimer`: logs the given seconds for each epoch (a clock the test controls)."""

    def __init__(self, epoch, validation=0.0, bleu=None):
        super().__init__()
        self.epoch, self.validation, self.bleu = epoch, validation, bleu

    def on_epoch_end(self, epoch, logs=None):
        logs["epoch_seconds"] = self.epoch[epoch] if isinstance(self.epoch, list) else self.epoch
        logs["validation_seconds"] = self.validation
        if self.bleu is not None:
            logs["bleu_seconds"] = self.bleu


def _fit_with_limit(epochs, times, limit):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    history = model.fit(np.zeros((4, 2), "float32"), np.zeros((4, 1), "float32"), batch_size=2, epochs=epochs,
                        verbose=0, callbacks=[times, limit])
    return len(history.history["loss"])


def test_training_seconds_is_the_epoch_less_its_evaluation():
    from keras_attention.training.callbacks import training_seconds

    assert training_seconds({"epoch_seconds": 80.0, "validation_seconds": 2.5, "bleu_seconds": 4.0}) == 73.5
    # A history.csv row: "NA" BLEU in an epoch without it; a log without the evaluation columns.
    assert training_seconds({"epoch_seconds": 80.0, "validation_seconds": 2.5, "bleu_seconds": "NA"}) == 77.5
    assert training_seconds({"epoch_seconds": 80.0, "loss": 1.0}) == 80.0
    assert training_seconds({}) == 0.0


def test_time_limit_stops_before_the_epoch_that_would_end_past_it(capsys):
    from keras_attention.training.callbacks import TimeLimit

    # Each epoch: 30 s, of which 5 s validating and 5 s of BLEU, so 20 s of training; 2 minutes hold 6 of them:
    # after epoch 5, 100 + 20 = 120 s fits; after epoch 6, 120 + 20 goes past.
    limit = TimeLimit(2)
    assert _fit_with_limit(10, _ScriptedTimes(30.0, validation=5.0, bleu=5.0), limit) == 6
    assert limit.stopped_after_epoch == 6 and sum(limit.seconds) == 120.0
    assert "Time limit: stopping after epoch 6: 2.0 of 2 minutes of training spent" in capsys.readouterr().out
    # A resumed run counts its earlier epochs: 100 s before, so only one 20-second epoch more.
    limit = TimeLimit(2, previous_seconds=[60.0, 40.0])
    assert _fit_with_limit(10, _ScriptedTimes(20.0), limit) == 1 and limit.stopped_after_epoch == 1


def test_time_limit_predicts_the_next_epoch_from_the_recent_ones():
    from keras_attention.training.callbacks import TimeLimit

    times = [100.0] + [20.0] * 9  # a first epoch that compiles, then 20 s each
    # 3 minutes: after epoch 1 the only epoch seen says 100 s more, and 100 + 100 > 180.
    limit = TimeLimit(3)
    assert _fit_with_limit(10, _ScriptedTimes(times), limit) == 1
    # 4 minutes: after epoch 2 the median of (100, 20) is taken as the upper one, 100, and 120 + 100 fits;
    # from epoch 3 on the median is 20, and epoch 8 ends at 240 s, where another 20 would not fit.
    limit = TimeLimit(4)
    assert _fit_with_limit(10, _ScriptedTimes(times), limit) == 8
    assert limit.stopped_after_epoch == 8 and sum(limit.seconds) == 240.0


def test_time_limit_does_not_claim_the_last_epoch_and_needs_the_timer():
    from keras_attention.training.callbacks import TimeLimit

    limit = TimeLimit(1)  # 3 epochs of 20 s end at exactly 60 s: the run ends there anyway
    assert _fit_with_limit(3, _ScriptedTimes(20.0), limit) == 3 and limit.stopped_after_epoch is None
    with pytest.raises(ValueError, match="put it after an EpochTimer"):
        _fit_with_limit(2, keras.callbacks.Callback(), TimeLimit(1))
    for minutes in (0, -1, "90", True):
        with pytest.raises(ValueError, match=r"`minutes` must be a number > 0. Received: minutes="):
            TimeLimit(minutes)
    with pytest.raises(ValueError, match=r"`window` must be an integer >= 1. Received: window=0"):
        TimeLimit(1, window=0)


class _FakeBleu(keras.callbacks.Callback):
    """Adds what `BleuCallback` adds to the epoch logs, without decoding."""

    def on_epoch_end(self, epoch, logs=None):
        logs.update(val_bleu=0.0, val_bleu_lowercase=0.0, val_chrf=7.5, bleu_seconds=0.5)


@pytest.mark.parametrize("verbose", [2, 0])
def test_epoch_line_prints_the_metrics_then_the_times_and_keeps_them_in_the_history(verbose, capsys):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    history = model.fit(x, y, batch_size=4, epochs=2, validation_data=(x, y), verbose=verbose,
                        callbacks=[_FakeBleu(), EpochTimer(), EpochLine()]).history
    assert {"epoch_seconds", "validation_seconds", "bleu_seconds", "val_bleu", "val_chrf"} <= set(history)
    lines = capsys.readouterr().out.splitlines()
    if not verbose:
        assert lines == []
        return
    metrics = [line for line in lines if " - loss: " in line]
    assert len(metrics) == 2
    for line in metrics:
        assert "val_loss: " in line and "seconds" not in line and "bleu" not in line and "chrf" not in line
    times = [line for line in lines if line.startswith("epoch ")]
    assert len(times) == 2 and times[0].startswith("epoch 1: ") and times[1].startswith("epoch 2: ")
    assert times[0].endswith("s validation, 0.5 s BLEU") and "of which" in times[0]
    assert lines.index(times[0]) == lines.index(metrics[0]) + 1  # right under its epoch's line
