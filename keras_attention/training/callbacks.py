"""Keras callbacks for translation training."""

import os
import re
import time

import keras

from keras_attention.base.files import replaced_atomically
from keras_attention.base.validation import POSITIVE, check_positive_int, check_range
from keras_attention.decoding.options import decoding_options
from keras_attention.training.evaluation import evaluate_bleu


class BleuCallback(keras.callbacks.Callback):
    """Decode a validation sample every `frequency` epochs and log BLEU and chrF.

    Adds `val_bleu`, `val_bleu_lowercase` and `val_chrf` to the epoch logs, so
    they appear in the progress bar's history, in `History`, in CSV/TensorBoard
    loggers, and can drive `ModelCheckpoint(monitor="val_bleu", mode="max")`;
    and `bleu_seconds`, the seconds the evaluation took.

    Args:
        translator: a `Translator` around the model being trained.
        pairs: list of `(source, target)` strings (keep it small: a few
            hundred sentences).
        frequency: int. Epochs between evaluations. Defaults to 1.
        options: a `decoding.DecodingOptions`, or a method name. Defaults to
            None (greedy).
        verbose: bool. Print the scores and one example. Defaults to True.
        **settings: fields of `DecodingOptions` that replace those of `options`.
    """

    def __init__(self, translator, pairs, frequency=1, options=None, verbose=True, **settings):
        super().__init__()
        self.translator = translator
        self.pairs = list(pairs)
        self.frequency = frequency
        self.options = decoding_options(options, **settings)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or (epoch + 1) % self.frequency:
            return
        started = time.perf_counter()
        scores = evaluate_bleu(self.translator, self.pairs, self.options)
        logs["bleu_seconds"] = time.perf_counter() - started
        logs["val_bleu"] = scores["bleu"]
        logs["val_bleu_lowercase"] = scores["bleu_lowercase"]
        logs["val_chrf"] = scores["chrf"]
        if self.verbose:
            print(
                f"\nepoch {epoch + 1}: BLEU {scores['bleu']:.2f} (lower-cased "
                f"{scores['bleu_lowercase']:.2f}), chrF {scores['chrf']:.2f} on {len(self.pairs)} "
                f"sentences\n  source:    {self.pairs[0][0]}\n  reference: {self.pairs[0][1]}\n"
                f"  output:    {scores['hypotheses'][0]}"
            )


class EpochTimer(keras.callbacks.Callback):
    """Log each epoch's wall-clock seconds as `epoch_seconds`, and its validation pass's as `validation_seconds`.

    The time runs from the epoch's start to this callback's `on_epoch_end`, so
    it covers the training steps, the validation pass and every callback
    placed before this one (put it after `BleuCallback` to count the BLEU
    evaluation, before `CSVLogger` to have the column in the file). Summing
    the column of a resumed job's `history.csv` gives its training time over
    all its processes; only the part of an epoch done before a kill, and not
    logged, is missing. `validation_seconds` (0 in an epoch without
    validation) and `BleuCallback`'s `bleu_seconds` are the parts of it spent
    evaluating.
    """

    def __init__(self):
        super().__init__()
        self._validation_seconds = 0.0  # `evaluate` alone (no epoch) adds to it harmlessly

    def on_epoch_begin(self, epoch, logs=None):
        self._started = time.perf_counter()
        self._validation_seconds = 0.0

    def on_test_begin(self, logs=None):
        self._test_started = time.perf_counter()

    def on_test_end(self, logs=None):
        self._validation_seconds += time.perf_counter() - self._test_started

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["epoch_seconds"] = time.perf_counter() - self._started
            logs["validation_seconds"] = self._validation_seconds


class EpochLine(keras.callbacks.ProgbarLogger):
    """Keras' progress line with the loss and the metrics only, then the epoch's times on a line of their own.

    The times (`epoch_seconds`, `validation_seconds`, `bleu_seconds`) and the
    BLEU figures (`BleuCallback` prints its own line, with two decimals) stay
    in the logs, for `History` and `history.csv`, and out of Keras' line,
    where they would read `val_bleu: 0.0000e+00`. Given to `fit` among the
    callbacks, it replaces Keras' own logger; place it after `EpochTimer`
    and `BleuCallback`, whose figures it reads.

    Example:

    >>> model.fit(batches, epochs=3, callbacks=[EpochTimer(), EpochLine()], verbose=2)  # doctest: +SKIP
    Epoch 1/3
    450/450 - 41s - 91ms/step - loss: 5.1208 - token_accuracy: 0.2414
    epoch 1: 41.3 s
    """

    HIDDEN = ("val_bleu", "val_bleu_lowercase", "val_chrf")
    async_safe = True  # it only filters the logs, as Keras' own logger reads them: batches may run ahead

    def _shown(self, logs):
        return {k: v for k, v in (logs or {}).items() if not k.endswith("_seconds") and k not in self.HIDDEN}

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, self._shown(logs))

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, self._shown(logs))
        if not self.verbose or not isinstance((logs or {}).get("epoch_seconds"), float):
            return
        named = (("validation_seconds", "validation"), ("bleu_seconds", "BLEU"))
        parts = [f"{logs[key]:.1f} s {name}" for key, name in named
                 if isinstance(logs.get(key), float) and logs[key] > 0]
        print(f"epoch {epoch + 1}: {logs['epoch_seconds']:.1f} s" + (f", of which {', '.join(parts)}" if parts else ""),
              flush=True)


def training_seconds(epoch):
    """An epoch's training seconds: its `epoch_seconds` less `validation_seconds` and `bleu_seconds`.

    `epoch` is one epoch's logs (as `EpochTimer` and `BleuCallback` fill them)
    or its row of `history.csv`; a value that is missing or not a number
    ("NA" in an epoch without BLEU) counts as 0: a time limit must go on with
    what it knows, where `recipe._evaluation_seconds`, a whole run's total for
    its results, says "unknown" instead.

    >>> training_seconds({"epoch_seconds": 80.0, "validation_seconds": 2.0, "bleu_seconds": "NA"})
    78.0
    """

    def seconds(name):
        value = epoch.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    return seconds("epoch_seconds") - seconds("validation_seconds") - seconds("bleu_seconds")


class TimeLimit(keras.callbacks.Callback):
    """Stop training before an epoch that would end past a budget of training minutes.

    At the end of each epoch, the minutes trained so far (this process' epochs
    and `previous_seconds`) plus the expected length of the next epoch (the
    median of the last `window` epochs) are compared with `minutes`; when they
    go beyond it, `fit` stops there. So a run ends within the budget as long as
    its epochs keep their recent speed, and a fast machine trains all the
    epochs asked for. Only training counts: each epoch's seconds come from
    `EpochTimer` (place this callback after it) less its validation pass and
    BLEU evaluation, the measure of `train`'s `train_seconds` minus its
    `evaluation_seconds` (see `training_seconds`). Like fairseq's
    `--stop-time-hours`, for shared machines and job queues with a time
    limit. The check runs when an epoch ends: a run resumed after its
    earlier processes spent the whole budget still trains one epoch.

    Args:
        minutes: float > 0. The budget of training minutes.
        previous_seconds: list of floats. Training seconds of the epochs run
            before this process (a resumed run). Defaults to none.
        window: int. Recent epochs whose median predicts the next. Defaults to 5.
        verbose: bool. Print a line when it stops the run. Defaults to True.

    Attributes:
        stopped_after_epoch: the 1-based epoch after which it stopped `fit`, or None.
        seconds: training seconds of every epoch so far, `previous_seconds` first.
    """

    def __init__(self, minutes, previous_seconds=(), window=5, verbose=True):
        super().__init__()
        self.minutes = check_range("minutes", minutes, POSITIVE)
        self.seconds = [float(s) for s in previous_seconds]
        self.window = check_positive_int("window", window)
        self.verbose = verbose
        self.stopped_after_epoch = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if "epoch_seconds" not in logs:
            raise ValueError("TimeLimit reads `epoch_seconds` from the epoch's logs: put it after an EpochTimer.")
        self.seconds.append(training_seconds(logs))
        recent = sorted(self.seconds[-self.window:])
        next_epoch = recent[len(recent) // 2]
        spent = sum(self.seconds)
        last = epoch + 1 >= (self.params or {}).get("epochs", epoch + 2)  # the run ends here anyway
        if spent + next_epoch > 60 * self.minutes and not (last or self.model.stop_training):
            self.model.stop_training = True
            self.stopped_after_epoch = epoch + 1
            if self.verbose:
                print(f"\nTime limit: stopping after epoch {epoch + 1}: {spent / 60:.1f} of {self.minutes:g} "
                      f"minutes of training spent; the next epoch would take about {next_epoch / 60:.1f} more.")


class StepTimer(keras.callbacks.Callback):
    """Where the time of `fit` goes before training runs at speed.

    Records the seconds from the start of `fit` to the end of its first
    training step, and the duration of every training and validation step.
    A step that compiles a new batch shape (XLA compiles once per shape) lasts
    many times the median step: `seconds_beyond_median` sums, over the steps
    longer than twice the median of their kind, their excess over that
    median, an estimate of the time spent compiling (and warming up).
    """

    def __init__(self):
        super().__init__()
        self.on_train_begin()  # a resumed run with every epoch done never starts `fit`

    def on_train_begin(self, logs=None):
        self.started = time.perf_counter()
        self.first_step_seconds = None
        self.durations = {"train": [], "test": []}
        self._step_started = None

    def _begin(self, batch, logs=None):
        self._step_started = time.perf_counter()

    def _end(self, kind):
        now = time.perf_counter()
        self.durations[kind].append(now - self._step_started)
        if kind == "train" and self.first_step_seconds is None:
            self.first_step_seconds = now - self.started

    on_train_batch_begin = on_test_batch_begin = _begin

    def on_train_batch_end(self, batch, logs=None):
        self._end("train")

    def on_test_batch_end(self, batch, logs=None):
        self._end("test")

    def summary(self):
        """`{"seconds_to_first_step", "seconds_beyond_median"}`, rounded to 0.1 s."""
        beyond = 0.0
        for durations in self.durations.values():
            if durations:
                median = sorted(durations)[len(durations) // 2]
                beyond += sum(d - median for d in durations if d > 2 * median)
        first = self.first_step_seconds
        return {"seconds_to_first_step": None if first is None else round(first, 1),
                "seconds_beyond_median": round(beyond, 1)}


class EpochCheckpoints(keras.callbacks.Callback):
    """Save the weights at the end of every epoch; keep only the last `keep` files.

    Files are `directory/epoch-001.weights.h5`, `epoch-002...` (1-based epoch
    numbers), the material for checkpoint averaging
    (`keras_attention.training.averaging`; the Transformer paper averaged the
    last 5 checkpoints of its base model and the last 20 of its big one).

    Args:
        directory: str. Folder for the checkpoints.
        keep: int. How many of the newest checkpoints to keep. Defaults to 5.
    """

    def __init__(self, directory, keep=5):
        super().__init__()
        self.directory = directory
        self.keep = check_positive_int("keep", keep)

    def on_epoch_end(self, epoch, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        with replaced_atomically(os.path.join(self.directory, f"epoch-{epoch + 1:03d}.weights.h5")) as partial:
            self.model.save_weights(partial, overwrite=True)
        for old in self.checkpoints()[: -self.keep]:
            os.remove(old)

    def checkpoints(self):
        """Paths of the saved checkpoints, oldest first."""
        if not os.path.isdir(self.directory):
            return []
        names = [n for n in os.listdir(self.directory) if re.fullmatch(r"epoch-\d+\.weights\.h5", n)]
        names.sort(key=lambda n: int(n[len("epoch-"):-len(".weights.h5")]))
        return [os.path.join(self.directory, n) for n in names]


class CorpusReportCallback(keras.callbacks.Callback):
    """Print what a streamed corpus skipped, once its first pass is done.

    At the end of the first epoch of `fit` the `CorpusReport`'s counters hold
    one whole pass over the training data (reset them before `fit` when
    something else read the data first); this prints them in one line and
    keeps a copy in `counts` for the run's results.

    Args:
        report: a `keras_attention.data.CorpusReport` the training data counts into.
        verbose: bool. Print the line. Defaults to True.
        limit: int or None. The pass used only the first `limit` pairs
            (`DataConfig.max_train_examples`). When the reader ran ahead of
            the limit, its counts (read, kept, skipped lines) go beyond the
            pairs used: only the pairs dropped for their token length, counted
            after the limit, are reported then. Defaults to None.
    """

    def __init__(self, report, verbose=True, limit=None):
        super().__init__()
        self.report = report
        self.verbose = verbose
        self.limit = limit
        self.counts = None

    def on_epoch_end(self, epoch, logs=None):
        if self.counts is not None:
            return
        self.counts = self.report.to_dict()
        text = str(self.report)
        dropped = self.counts.get("too_long_tokens", 0)
        dropped_text = f"{dropped:,} dropped with more tokens than the maximum length" if dropped else "none dropped"
        if self.limit is not None and self.counts["kept"] > self.limit:
            self.counts = {"used": self.limit, "too_long_tokens": dropped}
            text = f"the first {self.limit:,} pairs (max_train_examples); {dropped_text}"
        elif not self.counts["read"]:  # a source that counts no lines (the generated dates): the drops only
            text = f"{dropped:,} pairs dropped with more tokens than the maximum length" if dropped else "none dropped"
        if self.verbose:
            print(f"\nTraining data, first pass: {text}")
