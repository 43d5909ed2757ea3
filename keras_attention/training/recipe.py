"""The whole training job: data, tokenizers, model, `fit`, BLEU, a saved translator.

`train(TrainConfig(...))` is what `keras-attention train` and `demo` run. It
reads like a script, top to bottom; each step prints what it did. The
settings are in `training.config`, the data steps in `training.corpus`.
"""

import os
import time

import keras
import tensorflow as tf

from keras_attention import data
from keras_attention.base.files import write_json
from keras_attention.base.options import PEAK_LEARNING_RATE, WARMUP_FRACTION
from keras_attention.base.tensorflow_only import require_tensorflow
from keras_attention.decoding.translator import Translator
from keras_attention.models import build_model
from keras_attention.models.cpu_kernels import use_cpu_dropout, use_cpu_rows
from keras_attention.training import distribution
from keras_attention.training.callbacks import (
    BleuCallback,
    CorpusReportCallback,
    EpochCheckpoints,
    EpochLine,
    EpochTimer,
    StepTimer,
    TimeLimit,
    training_seconds,
)
from keras_attention.training.config import TrainConfig
from keras_attention.training.corpus import _distinct_shapes, load_splits, training_data
from keras_attention.training.distribution import get_strategy, set_precision
from keras_attention.training.evaluation import SCORE_KEYS, evaluate_bleu
from keras_attention.training.fault_tolerance import (
    ResumableBackup,
    check_backup_fits,
    fit_resumable,
    read_csv_history,
)
from keras_attention.training.interrupts import CtrlC
from keras_attention.training.losses import MaskedSparseCrossEntropy
from keras_attention.training.metrics import MaskedTokenAccuracy
from keras_attention.training.optimizers import Adam
from keras_attention.training.run_folder import RunFolder
from keras_attention.training.schedules import TransformerSchedule

# `TrainConfig` and `load_splits` live in `training.config` and `training.corpus`; here too, for scripts.
__all__ = ["TrainConfig", "build_and_compile", "compile_for_training", "load_splits", "train", "training_data"]


def compile_for_training(model, config, steps_per_epoch, jit_compile=None):
    """Compile `model` with the recipe's loss, metric and optimizer, as `train` does.

    Args:
        model: a built `keras.Model` of `config.model.kind`.
        config: the `TrainConfig`: its optimization section and the model's
            `recipe_learning_rate` (used when no fixed rate is given).
        steps_per_epoch: int. Batches an epoch (may be an estimate): the
            length of the Transformer's warm-up schedule.
        jit_compile: bool. Compile the training step with XLA. None (the
            default): `config.optimization.jit_compile` when it is True or
            False; "auto" (which `train` decides from the corpus' size) is
            False here.
    """
    optimization = config.optimization
    if jit_compile is None:
        jit_compile = optimization.jit_compile is True
    rate = optimization.learning_rate or config.model.recipe_learning_rate
    if rate == "warmup":
        total = steps_per_epoch * optimization.epochs
        warmup = optimization.warmup_steps or max(1, int(total * WARMUP_FRACTION))
        # The peak rate is the configured one whatever the warm-up length.
        peak = optimization.peak_learning_rate or PEAK_LEARNING_RATE
        if optimization.lr_schedule == "cosine":
            # The warm-up as TransformerSchedule's: iteration i (from 0) at peak * (i + 1) / warmup, the peak at
            # iteration warmup - 1, where Keras' cosine starts; it reaches zero at iteration `total`.
            rate = keras.optimizers.schedules.CosineDecay(peak / warmup, decay_steps=max(1, total - warmup + 1),
                                                          warmup_target=peak, warmup_steps=warmup - 1)
        else:
            rate = TransformerSchedule.with_peak(model.d_model, warmup, peak)
    # Our Adam clips the gradient of the global batch, not each replica's share.
    optimizer = Adam(rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9, clipnorm=1.0)
    model.compile(
        optimizer=optimizer,
        loss=MaskedSparseCrossEntropy(label_smoothing=optimization.label_smoothing),
        metrics=[MaskedTokenAccuracy()],
        jit_compile=jit_compile,
    )
    if jit_compile:
        # XLA compiles once per batch shape. The training step, run thousands of
        # times, pays that back; the validation pass, a forward pass over a few
        # batches of many shapes each epoch, does not: it runs without XLA.
        model.make_train_function()
        model.jit_compile = False  # read when the evaluation step is made, after the training step


def train(config, verbose=1):
    """Run a whole training job; return `(translator, results)`.

    Writes to `config.run.output_dir`: `backup/` (resumable state, removed after a
    finished run unless `config.run.keep_backup`), `checkpoints/` (the last epochs' weights), `translator/`
    (model and vocabularies; written before training, for evaluators, and
    after), `history.csv` and `results.json` (BLEU on the test split,
    timings, steps, what the corpus reader skipped, the configuration).

    Args:
        config: a `TrainConfig`.
        verbose: as `fit`'s: 1 a progress bar, 2 a line an epoch, 0 nothing but the
            notices that change the run (a restarted folder, partial batches, the time
            limit stopping it). With 1 or 2 it also prints the strategy, the data, the
            vocabularies and whether XLA compiles the step. Defaults to 1.

    Raises:
        data.CorpusError: with `config.data.strict_data`, the first bad training line
            (file and line named).
    """
    require_tensorflow("The training recipe (`train`)")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"`train` takes a TrainConfig. Received: {type(config).__name__}")
    config.check_paths()  # a missing file or folder: one line, before anything starts
    try:
        return _train(config, verbose)
    except tf.errors.InvalidArgumentError as error:
        problem = data.corpus_error(error)
        if problem is None:
            raise
        raise problem from None


def _train(config, verbose):
    strategy = get_strategy(config.run.strategy)  # first: a multi-worker strategy must precede any TF op
    time_limit = config.optimization.time_limit_minutes
    if time_limit and getattr(strategy, "cluster_resolver", None) is not None:
        raise ValueError("--time-limit works in one process: the workers of a multi-worker run would each stop "
                         "by their own clock, and one left training waits for the others forever. Received: "
                         f"--time-limit {time_limit:g} under MultiWorkerMirroredStrategy")
    output_dir = config.run.output_dir
    if not distribution.is_chief(strategy):
        output_dir = os.path.join(output_dir, distribution.task_name(strategy))
    folder = RunFolder(output_dir, resume=config.run.resume, overwrite=config.run.overwrite,
                       shared=distribution.num_workers(strategy) > 1)  # the other workers' folders are inside
    if folder.restarted:
        print(f"{output_dir} holds a run stopped before its first backup: starting it again "
              f"(its files wait in {folder.set_aside} until this run finishes).")
    try:
        result = _run(config, verbose, strategy, folder.paths)
    except BaseException:
        folder.failed()
        raise
    folder.finished()
    return result


def _run(config, verbose, strategy, paths):
    keras.utils.set_random_seed(config.data.seed)
    optimization = config.optimization
    set_precision(optimization.precision)
    batch = f"{optimization.batch_tokens} tokens" if optimization.batch_tokens else optimization.batch_size
    if verbose:
        print(f"Strategy: {distribution.describe(strategy)}, global batch {batch}. "
              f"Precision: {optimization.precision}.")
    prepared = training_data(config, strategy, verbose)  # also decides XLA: it shapes the batches
    jit_compile = prepared.xla
    if verbose:
        print(f"Data: {prepared.description}"
              f"{'; streamed from disk' if prepared.streaming else '; tokenized once, cached in memory'}.")
    model = build_and_compile(config, prepared, strategy)

    backup = ResumableBackup(paths.backup, save_freq=config.run.backup_every_steps or "epoch")
    backup.set_model(model)
    resumed_from = backup.restore()
    check_backup_fits(backup, optimization.epochs, prepared.steps_per_epoch)  # before anything is written
    source_language, target_language = prepared.languages or (config.data.source, config.data.target)
    translator = Translator(model, prepared.source_tokenizer, prepared.target_tokenizer,
                            prepared.max_length, prepared.max_length,
                            metadata={"source_language": source_language, "target_language": target_language,
                                      "dataset": prepared.description})
    # Early too (evaluators need the vocabularies); after the restore, so a resumed run's copy is its latest state.
    translator.save(paths.translator)
    callbacks, step_timer, report_callback, time_limit = _callbacks(config, prepared, translator, paths,
                                                                    resumed_from, verbose)
    if prepared.streaming:
        prepared.report.reset()  # building the model read ahead: count from the first epoch's start
    fit_started = time.time()
    with CtrlC() as ctrl_c:  # first: a Ctrl-C stops the run before any other callback of that batch
        fit_resumable(model, prepared.train, optimization.epochs, prepared.steps_per_epoch, backup,
                      [ctrl_c, *callbacks], validation_data=prepared.valid, verbose=verbose)
    fit_seconds = time.time() - fit_started
    history = read_csv_history(paths.history)  # all epochs, also those before a restart
    translator.save(paths.translator)

    results = {"data": prepared.description, "train_seconds": _train_seconds(history, fit_seconds),
               "evaluation_seconds": _evaluation_seconds(history),
               "parameters": int(model.count_params()), "steps": backup.completed_steps,
               "steps_per_epoch": prepared.steps_per_epoch, "resumed_from_step": resumed_from,
               "replicas": strategy.num_replicas_in_sync, "config": config.flat(),
               "start_up": {**step_timer.summary(), "xla": jit_compile,
                            "batch_shapes": _distinct_shapes(prepared.train, prepared.valid,
                                                             prepared.steps_per_epoch)},
               "data_counts": prepared.prepared_counts or report_callback.counts or prepared.report.to_dict()}
    if time_limit is not None:
        results["time_limit"] = {"minutes": time_limit.minutes, "stopped_after_epoch": time_limit.stopped_after_epoch}
    if prepared.test_pairs is not None:
        results.update(_test_scores(translator, prepared.test_pairs, config.data.max_test_examples))
    results["history"] = history
    write_json(paths.results, results, indent=2)
    if not config.run.keep_backup:
        backup.delete()  # last: until the results are written, the run can be started again
    return translator, results


def build_and_compile(config, prepared, strategy):
    """The model of `config`, built on a first batch of `prepared.train` and compiled as `train` compiles it.

    In the strategy's scope, with XLA as `training_data` decided (`prepared.xla`). Benchmarks use it to time
    the very training step `train` runs.
    """
    source_tok, target_tok = prepared.source_tokenizer, prepared.target_tokenizer
    overrides = dict(config.model.overrides)
    if config.model.share_embeddings:
        if source_tok.vocabulary != target_tok.vocabulary:
            raise ValueError(f"--share-embeddings needs one vocabulary, and {config.data.data_dir} was prepared "
                             "with two: prepare it again with --joint-vocabulary.")
        overrides["share_embeddings"] = True
    with strategy.scope():
        model = build_model(
            config.model.kind, config.model.preset, source_tok.vocab_size, target_tok.vocab_size,
            max_length=prepared.max_length, **overrides,
        )
        (source_ids, target_in), _ = next(iter(prepared.train))
        model((source_ids[:1], target_in[:1]))  # build the weights (BackupAndRestore needs them)
        if config.model.cpu_dropout:
            use_cpu_dropout(model)
        if config.model.cpu_rows:
            use_cpu_rows(model)
        compile_for_training(model, config, prepared.schedule_steps, prepared.xla)
        if getattr(strategy, "cluster_resolver", None) is not None:
            distribution.adapt_to_multi_worker(model, next(iter(prepared.train)))
    return model


def _callbacks(config, prepared, translator, paths, resumed_from, verbose):
    """The run's callbacks, in order, and the three whose figures go into results.json (the time limit: None
    without one)."""
    report_callback = CorpusReportCallback(prepared.report, verbose=bool(verbose), limit=config.data.max_train_examples)
    callbacks = [] if config.data.dataset == "prepared" else [report_callback]  # BLEU next, for the CSV log
    if prepared.valid_pairs is not None and config.run.bleu_sample:
        sample = [(s.decode(), t.decode())
                  for s, t in prepared.valid_pairs.take(config.run.bleu_sample).as_numpy_iterator()]
        callbacks.append(BleuCallback(translator, sample, verbose=bool(verbose)))
    if config.run.keep_checkpoints:
        callbacks.append(EpochCheckpoints(paths.checkpoints, config.run.keep_checkpoints))
    step_timer = StepTimer()
    callbacks += [step_timer, EpochTimer()]
    time_limit = None
    if config.optimization.time_limit_minutes:
        time_limit = TimeLimit(config.optimization.time_limit_minutes,
                               _earlier_training_seconds(paths.history, resumed_from, prepared.steps_per_epoch))
        callbacks.append(time_limit)
    callbacks += [keras.callbacks.CSVLogger(paths.history, append=resumed_from > 0), keras.callbacks.TerminateOnNaN(),
                  EpochLine()]  # Keras' progress line without the times and BLEU, which get lines of their own
    return callbacks, step_timer, report_callback, time_limit


def _earlier_training_seconds(history_path, resumed_from, steps_per_epoch):
    """The training seconds (validation and BLEU excluded) of each epoch a resumed run has done, from its log."""
    if not resumed_from:
        return []
    history = read_csv_history(history_path)
    done = len(history.get("loss", [])) if steps_per_epoch is None else resumed_from // steps_per_epoch
    rows = [{name: values[i] for name, values in history.items() if i < len(values)} for i in range(done)]
    return [training_seconds(row) for row in rows]  # an epoch the log lacks counts 0


def _train_seconds(history, this_process_seconds):
    """Training time: the epochs' own timings when every epoch has one (a resumed job's
    earlier processes included), else this process' time in fit."""
    epoch_seconds = history.get("epoch_seconds", [])
    if len(epoch_seconds) == len(history.get("loss", [])) and all(isinstance(s, float) for s in epoch_seconds):
        return round(sum(epoch_seconds), 1)
    return round(this_process_seconds, 1)


def _evaluation_seconds(history):
    """The part of `train_seconds` spent on the epochs' validation loss and BLEU, or None when
    some epoch did not record it (a run resumed from a backup written before they were timed).

    A whole run's figure, so an unrecorded epoch makes it unknown; `callbacks.training_seconds`,
    which reads the same columns for one epoch, counts a missing value as 0 instead.
    """
    validation = history.get("validation_seconds", [])
    if len(validation) != len(history.get("loss", [])) or not all(isinstance(s, float) for s in validation):
        return None
    bleu = [s for s in history.get("bleu_seconds", []) if isinstance(s, float)]  # "NA" in epochs without BLEU
    return round(sum(validation) + sum(bleu), 1)


def _test_scores(translator, test_pairs, max_examples):
    """results.json's `test` entry (greedy BLEU, chrF) and three example translations."""
    if max_examples:
        test_pairs = test_pairs.take(max_examples)
    scores = evaluate_bleu(translator, test_pairs)
    # Lists, not tuples: the returned results equal what results.json reads back.
    return {"test": {k: scores[k] for k in SCORE_KEYS},
            "examples": [[ref, hyp] for ref, hyp in zip(scores["references"][:3], scores["hypotheses"][:3])]}
