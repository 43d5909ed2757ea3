"""The whole training job: data, tokenizers, model, `fit`, BLEU, a saved translator.

`train(TrainConfig(...))` is what `keras-attention train` and `demo` run. It
reads like a script, top to bottom; each step prints what it did.
"""

import dataclasses
import json
import os
import time

import keras
import tensorflow as tf

from keras_attention import data
from keras_attention.decoding.translator import Translator
from keras_attention.models import build_model
from keras_attention.training import distribution
from keras_attention.training.callbacks import BleuCallback, EpochCheckpoints, EpochTimer
from keras_attention.training.distribution import get_strategy, set_precision
from keras_attention.training.evaluation import evaluate_bleu
from keras_attention.training.fault_tolerance import (
    ResumableBackup,
    check_backup_fits,
    fit_resumable,
    read_csv_history,
)
from keras_attention.training.losses import MaskedSparseCrossEntropy
from keras_attention.training.metrics import MaskedTokenAccuracy
from keras_attention.training.optimizers import Adam
from keras_attention.training.schedules import TransformerSchedule

DATASETS = ("multi30k", "dates", "files", "tsv", "tfds")


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run depends on (the CLI's `train` flags).

    Attributes:
        model: "transformer", "bahdanau", "luong" or "rnn".
        preset: "tiny", "small", "base" or "big".
        dataset: "multi30k", "dates" (generated), "files" (two aligned text
            files), "tsv" (one tab-separated file) or "tfds" (a TFDS data set).
        source, target: language codes (Multi30k: en, de, fr, cs; TFDS: the
            data set's feature names).
        data_dir: folder holding the corpus (Multi30k files, TFDS data).
        train_files, valid_files, test_files: for "files": (source, target)
            paths; for "tsv": a 1-tuple with the path.
        tfds_name: for "tfds", e.g. "wmt14_translate/de-en".
        vocab_size: WordPiece vocabulary size per language.
        target_vocab_size: a different size for the target side, or None.
        lower_case: lower-case text before tokenizing.
        max_length: longest tokenized sentence (markers included); longer
            training pairs are dropped, longer test sources truncated.
        epochs, batch_size: as in `fit` (batch_size is the global batch).
        batch_tokens: a token budget per batch instead of `batch_size` (each
            length bucket gets as many pairs as fit).
        learning_rate: None for the model's default (the warm-up schedule for
            the Transformer, 1e-3 for RNNs).
        warmup_steps: Transformer warm-up; None means 5% of all steps.
        label_smoothing: epsilon of the loss.
        strategy, precision, jit_compile: see `training.distribution` (XLA
            is used with one replica only).
        output_dir: where checkpoints, the translator and results go (other
            tasks than the chief of a multi-worker cluster use a subfolder).
        backup_every_steps: back up the training state every N steps (and at
            each epoch end), or None for epoch ends only; a killed run started
            again with the same command resumes from the backup.
        keep_backup: keep `backup/` after the run (it is removed otherwise),
            so that the same command with more `epochs` extends the run
            instead of starting again. The extension continues the optimizer
            from the last step, and the learning-rate schedule too when it
            does not depend on the epoch count (a fixed rate, or an explicit
            `warmup_steps`); its epochs are shuffled afresh.
        keep_checkpoints: keep the weights of the last N epochs in
            `checkpoints/` for checkpoint averaging (0: none).
        max_train_examples: use only the first N training pairs (quick runs).
        bleu_sample: validation sentences decoded by the BLEU callback.
        seed: random seed for weights and shuffling.
        overrides: extra model constructor arguments.
    """

    model: str = "transformer"
    preset: str = "small"
    dataset: str = "multi30k"
    source: str = "en"
    target: str = "de"
    data_dir: str = None
    train_files: tuple = None
    valid_files: tuple = None
    test_files: tuple = None
    tfds_name: str = None
    vocab_size: int = 8000
    target_vocab_size: int = None
    lower_case: bool = False
    max_length: int = 64
    epochs: int = 10
    batch_size: int = 64
    batch_tokens: int = None
    learning_rate: float = None
    warmup_steps: int = None
    label_smoothing: float = 0.1
    strategy: str = "auto"
    precision: str = "float32"
    jit_compile: bool = True
    output_dir: str = "runs/latest"
    backup_every_steps: int = None
    keep_backup: bool = False
    keep_checkpoints: int = 5
    max_train_examples: int = None
    bleu_sample: int = 200
    seed: int = 0
    overrides: dict = dataclasses.field(default_factory=dict)


def load_splits(config):
    """(train, valid, test) datasets of string pairs, and a sentence saying what they are."""
    if config.dataset == "multi30k":
        load = lambda split: data.load_multi30k(config.source, config.target, split, config.data_dir)  # noqa: E731
        splits = load("train"), load("val"), load("test_2016_flickr")
        return splits, f"Multi30k {config.source}->{config.target}"
    if config.dataset == "dates":
        sizes = {"train": config.max_train_examples or 20000, "val": 1000, "test": 1000}
        splits = tuple(data.load_dates(n, split, seed=config.seed) for split, n in sizes.items())
        return splits, "the generated dates corpus (human dates -> ISO 8601)"
    if config.dataset == "files":
        splits = tuple(
            data.load_parallel_files(*paths) if paths else None
            for paths in (config.train_files, config.valid_files, config.test_files)
        )
        return splits, f"parallel files {config.train_files}"
    if config.dataset == "tsv":
        splits = tuple(
            data.load_tsv(paths[0]) if paths else None
            for paths in (config.train_files, config.valid_files, config.test_files)
        )
        return splits, f"TSV file {config.train_files[0]}"
    if config.dataset == "tfds":
        load = lambda split: data.load_tfds_translation(  # noqa: E731
            config.tfds_name, config.source, config.target, split, config.data_dir
        )
        return (load("train"), load("validation"), load("test")), f"TFDS {config.tfds_name}"
    raise ValueError(f"`dataset` must be one of {DATASETS}. Received: dataset={config.dataset!r}")


def _source_side(source, target):
    return source


def _target_side(source, target):
    return target


def _sides(pairs):
    return pairs.map(_source_side), pairs.map(_target_side)


def _compile(model, config, steps_per_epoch, jit_compile):
    if config.learning_rate is not None:
        rate = config.learning_rate
    elif config.model == "transformer":
        total = steps_per_epoch * config.epochs
        warmup = config.warmup_steps or max(1, total // 20)
        # Scale so that the peak rate is about 1e-3 whatever the warm-up length.
        peak = (model.d_model * warmup) ** -0.5
        rate = TransformerSchedule(model.d_model, warmup, scale=1e-3 / peak)
    else:
        rate = 1e-3
    # Our Adam clips the gradient of the global batch, not each replica's share.
    optimizer = Adam(rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9, clipnorm=1.0)
    model.compile(
        optimizer=optimizer,
        loss=MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing),
        metrics=[MaskedTokenAccuracy()],
        jit_compile=jit_compile,
    )


def train(config, verbose=1):
    """Run a whole training job; return `(translator, results)`.

    Writes to `config.output_dir`: `backup/` (resumable state, removed after a
    finished run unless `config.keep_backup`), `checkpoints/` (the last epochs' weights), `translator/`
    (model and vocabularies; written before training, for evaluators, and
    after), `history.csv` and `results.json` (BLEU on the test split,
    timings, steps, the configuration).
    """
    strategy = get_strategy(config.strategy)  # first: a multi-worker strategy must precede any TF op
    output_dir = config.output_dir
    if not distribution.is_chief(strategy):
        output_dir = os.path.join(output_dir, distribution.task_name(strategy))
    os.makedirs(output_dir, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    set_precision(config.precision)
    jit_compile = config.jit_compile and distribution.xla_supported(strategy)
    (train_pairs, valid_pairs, test_pairs), description = load_splits(config)
    if config.max_train_examples:
        train_pairs = train_pairs.take(config.max_train_examples)
    print(f"Data: {description}. Strategy: {type(strategy).__name__} with "
          f"{strategy.num_replicas_in_sync} replica(s), global batch "
          f"{f'{config.batch_tokens} tokens' if config.batch_tokens else config.batch_size}. "
          f"Precision: {config.precision}. XLA: {'on' if jit_compile else 'off'}.")

    started = time.time()
    source_texts, target_texts = _sides(train_pairs)
    options = dict(lower_case=config.lower_case)
    source_tok = data.SubwordTokenizer.from_dataset(source_texts, config.vocab_size, **options)
    target_size = config.target_vocab_size or config.vocab_size
    target_tok = data.SubwordTokenizer.from_dataset(target_texts, target_size, **options)
    print(f"Vocabularies: {source_tok.vocab_size} source and {target_tok.vocab_size} target "
          f"tokens ({time.time() - started:.0f} s).")

    # Under XLA every new batch shape costs a compilation: pad each batch to its
    # bucket's boundary and drop the ragged last batch, so a few shapes recur.
    train_ds = data.make_translation_dataset(
        train_pairs, source_tok, target_tok, None if config.batch_tokens else config.batch_size,
        batch_tokens=config.batch_tokens, max_length=config.max_length,
        bucket_boundaries="auto", pad_to_bucket_boundary=config.jit_compile,
        drop_remainder=config.jit_compile, shuffle=True, seed=config.seed,
    )
    valid_ds = None
    if valid_pairs is not None:
        valid_ds = data.make_translation_dataset(
            valid_pairs, source_tok, target_tok, config.batch_size, max_length=config.max_length,
            on_long="truncate",
        )
        valid_ds = valid_ds.apply(tf.data.experimental.assert_cardinality(sum(1 for _ in valid_ds)))
    steps_per_epoch = int(train_ds.cardinality())
    if steps_per_epoch < 0:  # bucketing hides the count: count once, then declare it
        steps_per_epoch = sum(1 for _ in train_ds)
        train_ds = train_ds.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))

    with strategy.scope():
        model = build_model(
            config.model, config.preset, source_tok.vocab_size, target_tok.vocab_size,
            max_length=config.max_length, **config.overrides,
        )
        (source_ids, target_in), _ = next(iter(train_ds))
        model((source_ids[:1], target_in[:1]))  # build the weights (BackupAndRestore needs them)
        _compile(model, config, steps_per_epoch, jit_compile)
        if getattr(strategy, "cluster_resolver", None) is not None:
            distribution.adapt_to_multi_worker(model, next(iter(train_ds)))

    backup = ResumableBackup(os.path.join(output_dir, "backup"), save_freq=config.backup_every_steps or "epoch")
    backup.set_model(model)
    resumed_from = backup.restore()
    check_backup_fits(backup, config.epochs, steps_per_epoch)  # before anything is written
    translator = Translator(model, source_tok, target_tok, config.max_length, config.max_length)
    # Early too (evaluators need the vocabularies); after the restore, so a resumed run's copy is its latest state.
    translator.save(os.path.join(output_dir, "translator"))
    callbacks = []  # BLEU first, so that the CSV log has its scores
    if valid_pairs is not None and config.bleu_sample:
        sample = [(s.decode(), t.decode()) for s, t in valid_pairs.take(config.bleu_sample).as_numpy_iterator()]
        callbacks.append(BleuCallback(translator, sample, verbose=bool(verbose)))
    if config.keep_checkpoints:
        callbacks.append(EpochCheckpoints(os.path.join(output_dir, "checkpoints"), config.keep_checkpoints))
    history_path = os.path.join(output_dir, "history.csv")
    callbacks += [EpochTimer(), keras.callbacks.CSVLogger(history_path, append=resumed_from > 0), keras.callbacks.TerminateOnNaN()]
    fit_started = time.time()
    fit_resumable(model, train_ds, config.epochs, steps_per_epoch, backup, callbacks,
                  validation_data=valid_ds, verbose=verbose, shuffle=False)  # the dataset shuffles
    train_seconds = time.time() - fit_started
    if not config.keep_backup:
        backup.delete()
    history = read_csv_history(history_path)  # all epochs, also those before a restart
    epoch_seconds = history.get("epoch_seconds", [])
    if len(epoch_seconds) == len(history.get("loss", [])) and all(isinstance(s, float) for s in epoch_seconds):
        train_seconds = sum(epoch_seconds)  # every process of a resumed job, not only this one

    translator.save(os.path.join(output_dir, "translator"))
    results = {"data": description, "train_seconds": round(train_seconds, 1),
               "parameters": int(model.count_params()), "steps": backup.completed_steps,
               "steps_per_epoch": steps_per_epoch, "resumed_from_step": resumed_from,
               "replicas": strategy.num_replicas_in_sync, "config": dataclasses.asdict(config)}
    if test_pairs is not None:
        scores = evaluate_bleu(translator, test_pairs)
        results["test"] = {k: scores[k] for k in ("bleu", "bleu_lowercase", "chrf", "num_sentences")}
        # Lists, not tuples: the returned results equal what results.json reads back.
        results["examples"] = [[ref, hyp] for ref, hyp in zip(scores["references"][:3], scores["hypotheses"][:3])]
    results["history"] = history
    with open(os.path.join(output_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, ensure_ascii=False)
    return translator, results
