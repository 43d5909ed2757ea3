"""The whole training job: data, tokenizers, model, `fit`, BLEU, a saved translator.

`train(TrainConfig(...))` is what `keras-attention train` and `demo` run. It
reads like a script, top to bottom; each step prints what it did.
"""

import dataclasses
import os
import time

import keras
import tensorflow as tf

from keras_attention.tensorflow_only import require_tensorflow
from keras_attention import data
from keras_attention.decoding.translator import Translator
from keras_attention.files import write_json
from keras_attention.options import check_options
from keras_attention.cpu_dropout import use_cpu_dropout
from keras_attention.models import build_model
from keras_attention.training import distribution
from keras_attention.training.callbacks import (
    BleuCallback,
    CorpusReportCallback,
    EpochCheckpoints,
    EpochTimer,
    StepTimer,
)
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
from keras_attention.training.run_folder import RunFolder
from keras_attention.training.schedules import TransformerSchedule

DATASETS = ("multi30k", "dates", "files", "tsv", "tfds", "wmt14", "prepared")
# The user's own corpora: cleaned by default (word limits as Moses' clean-corpus-n).
USER_FILES = ("files", "tsv", "wmt14")
# Pairs whose lengths are measured before training when a corpus streams.
STATS_SAMPLE = 100_000


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run depends on (the CLI's `train` flags).

    Attributes:
        model: "transformer", "bahdanau", "luong" or "rnn".
        preset: "tiny", "small", "base" or "big".
        dataset: "multi30k", "dates" (generated), "files" (aligned text
            files, shards and globs allowed), "tsv" (tab-separated files),
            "tfds" (a TFDS data set), "wmt14" (local WMT14 en-de files in
            `data_dir`) or "prepared" (a folder from `keras-attention prepare`
            in `data_dir`).
        source, target: language codes (Multi30k: en, de, fr, cs; TFDS: the
            data set's feature names).
        data_dir: folder holding the corpus (Multi30k files, TFDS data).
        train_files, valid_files, test_files: for "files": (source, target)
            paths or glob patterns; for "tsv": a 1-tuple with the path.
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
        cpu_dropout: cheaper dropout random numbers under XLA on a CPU (see
            `keras_attention.cpu_dropout`; without effect on a GPU).
        output_dir: where checkpoints, the translator and results go (other
            tasks than the chief of a multi-worker cluster use a subfolder).
        backup_every_steps: back up the training state every N steps (and at
            each epoch end), or None for epoch ends only; a killed run started
            again with `resume=True` continues from the backup.
        resume: continue the run in `output_dir` from its backup (or start
            one if the folder holds none). Defaults to False.
        overwrite: start again in an `output_dir` that holds a run; the old
            run is deleted only once the new one has finished (see
            `training.run_folder`). Without `resume` or `overwrite`, a
            folder holding a run is an error. Defaults to False.
        keep_backup: keep `backup/` after the run (it is removed otherwise),
            so that `resume=True` with more `epochs` extends the run
            instead of starting again. The extension continues the optimizer
            from the last step, and the learning-rate schedule too when it
            does not depend on the epoch count (a fixed rate, or an explicit
            `warmup_steps`); its epochs are shuffled afresh.
        keep_checkpoints: keep the weights of the last N epochs in
            `checkpoints/` for checkpoint averaging (0: none).
        max_train_examples: use only the first N training pairs (quick runs).
        max_test_examples: score only the first N test pairs after training
            (quick runs); None for the whole test split.
        bleu_sample: validation sentences decoded by the BLEU callback.
        seed: random seed for weights and shuffling.
        overrides: extra model constructor arguments.
        strict_data: a bad training line (not UTF-8, empty side, too long,
            too unequal) is an error naming file and line, instead of being
            skipped and counted.
        clean: for the user's corpora ("files", "tsv", "wmt14"), skip pairs
            over `max_words` words or with a word ratio over `max_ratio`.
        max_words, max_ratio: the cleaning limits.
        vocab_sample: the vocabularies learn from at most this many training
            sentences, spread over the corpus.
        joint_vocabulary: one vocabulary learned from both sides, for both.
        share_embeddings: one embedding matrix for the source, the target and
            the output projection (Transformer only; needs one vocabulary:
            `joint_vocabulary`, or a prepared corpus made with it).
        cache_limit: corpora of at most this many pairs are tokenized once
            and kept in memory; larger ones stream from disk each epoch.
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
    cpu_dropout: bool = True
    output_dir: str = "runs/latest"
    backup_every_steps: int = None
    resume: bool = False
    overwrite: bool = False
    keep_backup: bool = False
    keep_checkpoints: int = 5
    max_train_examples: int = None
    max_test_examples: int = None
    bleu_sample: int = 200
    seed: int = 0
    overrides: dict = dataclasses.field(default_factory=dict)
    strict_data: bool = False
    clean: bool = True
    max_words: int = 250
    max_ratio: float = 9.0
    vocab_sample: int = 1_000_000
    joint_vocabulary: bool = False
    share_embeddings: bool = False
    cache_limit: int = 200_000

    def __post_init__(self):
        check_options(self)  # the ranges the command line checks too
        if self.share_embeddings and self.model != "transformer":
            raise ValueError("--share-embeddings is for the Transformer (an RNN's source and target "
                             f"embeddings differ in use). Received: --model {self.model}")
        if self.share_embeddings and not self.joint_vocabulary and self.dataset != "prepared":
            raise ValueError("--share-embeddings needs one vocabulary for both languages: add "
                             "--joint-vocabulary. Received: separate vocabularies")


def load_splits(config, report=None):
    """(train, valid, test) datasets of string pairs, and a sentence saying what they are.

    `report`, a `data.CorpusReport`, counts what the training split skips.
    Only the training split is cleaned; validation and test sets are read as
    they are (but for empty lines, skipped).
    """
    train_options = _train_text_options(config, report)
    if config.dataset == "multi30k":
        load = lambda split, **kw: data.load_multi30k(config.source, config.target, split, config.data_dir, **kw)  # noqa: E731
        splits = load("train", report=report), load("val"), load("test_2016_flickr")
        return splits, f"Multi30k {config.source}->{config.target}"
    if config.dataset == "dates":
        sizes = {"train": config.max_train_examples or 20000, "val": 1000, "test": 1000}
        splits = tuple(data.load_dates(n, split, seed=config.seed) for split, n in sizes.items())
        return splits, "the generated dates corpus (human dates -> ISO 8601)"
    if config.dataset == "files":
        given = {"--train-files": config.train_files, "--valid-files": config.valid_files,
                 "--test-files": config.test_files}
        for flag, paths in given.items():
            if paths and len(paths) != 2:
                raise ValueError(f"{flag} takes SOURCE TARGET (paths or glob patterns). "
                                 f"Received: {flag} {' '.join(paths)}")
        named = [paths for paths in given.values() if paths]
        if not named:
            raise ValueError("--dataset files needs --train-files SOURCE TARGET (to evaluate: --test-files "
                             "or --valid-files). Received: none of them")
        splits = (data.load_parallel_files(*config.train_files, **train_options) if config.train_files else None,
                  *(data.load_parallel_files(*paths) if paths else None
                    for paths in (config.valid_files, config.test_files)))
        return splits, f"parallel files {named[0][0]} / {named[0][1]}"
    if config.dataset == "tsv":
        if not config.train_files:
            raise ValueError("--dataset tsv needs --train-files FILE. Received: --train-files (none)")
        splits = (data.load_tsv(config.train_files[0], **train_options),
                  *(data.load_tsv(paths[0]) if paths else None
                    for paths in (config.valid_files, config.test_files)))
        return splits, f"TSV file {config.train_files[0]}"
    if config.dataset == "wmt14":
        load = lambda split, **kw: data.load_wmt14(config.source, config.target, split, config.data_dir, **kw)  # noqa: E731
        splits = load("train", **train_options), load("validation"), load("test")
        return splits, f"WMT14 {config.source}->{config.target} ({config.data_dir})"
    if config.dataset == "tfds":
        load = lambda split: data.load_tfds_translation(  # noqa: E731
            config.tfds_name, config.source, config.target, split, config.data_dir
        )
        return (load("train"), load("validation"), load("test")), f"TFDS {config.tfds_name}"
    if config.dataset == "prepared":
        corpus = data.PreparedCorpus(config.data_dir)
        splits = [None] + [data.load_parallel_files(*files) if files else None
                           for files in (corpus.text_split("valid"), corpus.text_split("test"))]
        return tuple(splits), f"prepared corpus {config.data_dir} ({corpus.num_pairs:,} pairs)"
    raise ValueError(f"`dataset` must be one of {DATASETS}. Received: dataset={config.dataset!r}")


def _train_text_options(config, report):
    """The streaming loaders' options for the training split of the user's own files."""
    clean = config.clean and config.dataset in USER_FILES
    return dict(strict=config.strict_data, report=report, with_locations=config.strict_data,
                max_words=config.max_words if clean else None,
                max_ratio=config.max_ratio if clean else None)


def _source_side(source, target, *location):
    return source


def _target_side(source, target, *location):
    return target


def _sides(pairs):
    return pairs.map(_source_side), pairs.map(_target_side)


def build_tokenizers(config, train_pairs, total):
    """Source and target tokenizers learned from a bounded sample of the training pairs."""
    source_texts, target_texts = _sides(train_pairs)
    options = dict(lower_case=config.lower_case, max_sentences=config.vocab_sample)
    if config.joint_vocabulary:
        both = source_texts.concatenate(target_texts)
        joint = data.SubwordTokenizer.from_dataset(
            both, config.target_vocab_size or config.vocab_size,
            total=2 * total if total else None, **options)
        return joint, joint
    source_tok = data.SubwordTokenizer.from_dataset(source_texts, config.vocab_size, total=total, **options)
    target_size = config.target_vocab_size or config.vocab_size
    target_tok = data.SubwordTokenizer.from_dataset(target_texts, target_size, total=total, **options)
    return source_tok, target_tok


def _estimate_steps(pairs, stats, config):
    """About how many batches one pass over `pairs` pairs gives (for the warm-up)."""
    kept = pairs * (1 - stats.long_pairs / max(stats.pairs, 1)) if stats.action == "drop" else pairs
    if config.batch_tokens:
        mean = float(stats.lengths.mean()) if stats.lengths.size else 1.0
        return max(1, int(kept * mean / config.batch_tokens))
    return max(1, int(kept / config.batch_size))


def _compile(model, config, steps_per_epoch, jit_compile):
    """Compile with the recipe's loss, metric and optimizer (`steps_per_epoch` may be an estimate)."""
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
    if jit_compile:
        # XLA compiles once per batch shape. The training step, run thousands of
        # times, pays that back; the validation pass, a forward pass over a few
        # batches of many shapes each epoch, does not: it runs without XLA.
        model.make_train_function()
        model.jit_compile = False  # read when the evaluation step is made, after the training step


@dataclasses.dataclass
class TrainingData:
    """What `prepare_data` makes ready for `fit` (see there)."""

    train: tf.data.Dataset
    valid: tf.data.Dataset
    valid_pairs: tf.data.Dataset
    test_pairs: tf.data.Dataset
    source_tokenizer: data.SubwordTokenizer
    target_tokenizer: data.SubwordTokenizer
    steps_per_epoch: int
    schedule_steps: int
    max_length: int
    description: str
    report: data.CorpusReport
    streaming: bool
    prepared_counts: dict = None
    languages: tuple = None


def prepare_data(config, strategy):
    """Load the corpus, learn or read the vocabularies and make the batches.

    A corpus of at most `config.cache_limit` pairs is tokenized once and
    cached, and its exact number of batches counted. A larger one streams:
    nothing that grows with it is kept in memory, the lengths come from its
    first `STATS_SAMPLE` pairs, an epoch is one pass (`steps_per_epoch` is
    None) and the warm-up uses an estimate of the steps. A prepared corpus
    streams from its shards and knows its exact number of batches.
    """
    report = data.CorpusReport()
    (train_pairs, valid_pairs, test_pairs), description = load_splits(config, report)
    if train_pairs is None and config.dataset != "prepared":
        raise ValueError(f"Training needs a training split; {description} has none: give --train-files.")
    workers = distribution.num_workers(strategy)
    if config.dataset == "prepared":
        return _prepared_data(config, valid_pairs, test_pairs, description, report, strategy)
    total = report.lines if report.lines is not None else int(train_pairs.cardinality())
    total = None if total is not None and total < 0 else total
    if config.max_train_examples:
        train_pairs = train_pairs.take(config.max_train_examples)
        total = min(total, config.max_train_examples) if total else config.max_train_examples
    streaming = total is None or total > config.cache_limit
    if streaming and workers > 1:
        raise ValueError(
            f"A corpus of more than {config.cache_limit:,} pairs streams, and under "
            "MultiWorkerMirroredStrategy each worker needs a known number of batches: prepare it "
            "once with `keras-attention prepare` and train with --data-dir PREPARED. "
            f"Received: {total or 'an unknown number of'} pairs")

    started = time.time()
    source_tok, target_tok = build_tokenizers(config, train_pairs, total)
    print(f"Vocabularies: {source_tok.vocab_size} source and {target_tok.vocab_size} target tokens"
          f"{' (joint)' if source_tok is target_tok else ''}, from at most {config.vocab_sample:,} "
          f"sentences ({time.time() - started:.0f} s).")
    report.reset()  # count the training pass only, not the vocabulary's sample

    def batches(drop_remainder):
        return data.make_translation_dataset(
            train_pairs, source_tok, target_tok, None if config.batch_tokens else config.batch_size,
            batch_tokens=config.batch_tokens, max_length=config.max_length,
            bucket_boundaries="auto", pad_to_bucket_boundary=config.jit_compile,
            drop_remainder=drop_remainder, shuffle=True, seed=config.seed, return_stats=True,
            cache=not streaming, stats_sample=STATS_SAMPLE if streaming else None, report=report,
            strict=config.strict_data and len(train_pairs.element_spec) == 3,
        )

    # Under XLA every new batch shape costs a compilation: pad each batch to its
    # bucket's boundary and drop the ragged last batch, so a few shapes recur.
    train_ds, stats = batches(drop_remainder=config.jit_compile)
    if streaming:
        report.reset()  # the length sample read the corpus' head: count from the first epoch on
        steps_per_epoch, schedule_steps = None, _estimate_steps(total or STATS_SAMPLE, stats, config)
    else:
        train_ds, steps_per_epoch = _counted(train_ds)
        if steps_per_epoch == 0 and config.jit_compile and stats.pairs > stats.long_pairs:
            # A small corpus whose length buckets each hold less than a batch: keep the partial ones.
            train_ds, steps_per_epoch = _counted(batches(drop_remainder=False)[0])
            print(f"The training data fills no whole batch of {_batch_words(config)} in any length bucket "
                  f"({stats.pairs - stats.long_pairs} pairs): training on partial batches, "
                  f"{steps_per_epoch} an epoch.")
        schedule_steps = steps_per_epoch
    if steps_per_epoch == 0:
        raise ValueError(f"The training data gives no batch ({stats}); raise --max-length "
                         f"(now {config.max_length}) or give more data.")
    boundaries = data.auto_bucket_boundaries(stats.lengths)  # those of the training batches
    valid_ds = _valid_batches(config, valid_pairs, source_tok, target_tok, config.max_length, boundaries)
    return TrainingData(train_ds, valid_ds, valid_pairs, test_pairs, source_tok, target_tok,
                        steps_per_epoch, schedule_steps, config.max_length, description, report,
                        streaming)


def _counted(train_ds):
    """`(dataset, batches in one pass)`, the count declared on the dataset for `fit`."""
    steps = int(train_ds.cardinality())
    if steps < 0:  # bucketing hides the count: count once, then declare it
        steps = len(batch_shapes(train_ds))
        train_ds = train_ds.apply(tf.data.experimental.assert_cardinality(steps))
    return train_ds, steps


def _distinct_shapes(train_ds, valid_ds, steps_per_epoch):
    """Distinct batch shapes of an epoch's training and of validation (what XLA compiles for).

    None for a corpus streamed from text (one pass is the whole corpus, read again).
    """
    if steps_per_epoch is None:
        return None
    return {"train": len(set(batch_shapes(train_ds.take(steps_per_epoch)))),
            "validation": 0 if valid_ds is None else len(set(batch_shapes(valid_ds)))}


def batch_shapes(dataset):
    """The `(source, target)` shape of every batch of one pass, in order."""
    return [(tuple(x.shape), tuple(y.shape)) for (x, y), _ in dataset]


def _batch_words(config):
    return f"{config.batch_tokens} tokens" if config.batch_tokens else f"{config.batch_size} pairs"


def _prepared_data(config, valid_pairs, test_pairs, description, report, strategy):
    corpus = data.PreparedCorpus(config.data_dir)
    source_tok, target_tok = corpus.tokenizers()
    batching = dict(batch_size=None if config.batch_tokens else config.batch_size,
                    batch_tokens=config.batch_tokens, pad_to_bucket_boundary=config.jit_compile,
                    num_workers=distribution.num_workers(strategy))
    steps_per_epoch = corpus.steps_per_epoch(**batching)
    if steps_per_epoch == 0:
        raise ValueError(f"{config.data_dir}: {corpus.num_pairs:,} pairs give no full batch per worker; "
                         f"use a smaller --batch-size (now {config.batch_size}) or --batch-tokens.")
    # Repeated, with a fixed number of steps an epoch: every worker does the same number.
    train_ds = corpus.dataset(**batching, seed=config.seed, repeat=True,
                              worker_index=distribution.worker_index(strategy))
    counts = corpus.manifest.get("counts", {})
    skipped = {k: v for k, v in counts.items() if k not in ("lines", "read", "kept") and v}
    print(f"Prepared corpus: {corpus.num_pairs:,} pairs in {len(corpus.files)} shards, "
          f"{steps_per_epoch} steps an epoch; skipped when prepared: {skipped or 'none'}.")
    max_length = max(corpus.max_length)
    valid_ds = _valid_batches(config, valid_pairs, source_tok, target_tok, max_length)
    return TrainingData(train_ds, valid_ds, valid_pairs, test_pairs, source_tok, target_tok,
                        steps_per_epoch, steps_per_epoch, max_length, description, report, True,
                        prepared_counts=counts, languages=(
                            corpus.manifest.get("source_language", config.source),
                            corpus.manifest.get("target_language", config.target)))


def _valid_batches(config, valid_pairs, source_tok, target_tok, max_length, boundaries="auto"):
    if valid_pairs is None:
        return None
    # Under XLA each new batch shape compiles the evaluation step anew: the
    # validation batches take the training batches' length buckets, padded to
    # their boundaries, so they add at most a shape or two per bucket.
    buckets = dict(bucket_boundaries=boundaries, pad_to_bucket_boundary=True) if config.jit_compile else {}
    valid_ds = data.make_translation_dataset(
        valid_pairs, source_tok, target_tok, config.batch_size, max_length=max_length,
        on_long="truncate", **buckets,
    )
    return valid_ds.apply(tf.data.experimental.assert_cardinality(len(batch_shapes(valid_ds))))


def train(config, verbose=1):
    """Run a whole training job; return `(translator, results)`.

    Writes to `config.output_dir`: `backup/` (resumable state, removed after a
    finished run unless `config.keep_backup`), `checkpoints/` (the last epochs' weights), `translator/`
    (model and vocabularies; written before training, for evaluators, and
    after), `history.csv` and `results.json` (BLEU on the test split,
    timings, steps, what the corpus reader skipped, the configuration).

    Raises:
        data.CorpusError: with `strict_data`, the first bad training line
            (file and line named).
    """
    require_tensorflow("The training recipe (`train`)")
    try:
        return _train(config, verbose)
    except tf.errors.InvalidArgumentError as error:
        problem = data.corpus_error(error)
        if problem is None:
            raise
        raise problem from None


def _train(config, verbose):
    strategy = get_strategy(config.strategy)  # first: a multi-worker strategy must precede any TF op
    output_dir = config.output_dir
    if not distribution.is_chief(strategy):
        output_dir = os.path.join(output_dir, distribution.task_name(strategy))
    folder = RunFolder(output_dir, resume=config.resume, overwrite=config.overwrite)
    try:
        result = _run(config, verbose, strategy, output_dir)
    except BaseException:
        folder.failed()
        raise
    folder.finished()
    return result


def _run(config, verbose, strategy, output_dir):
    keras.utils.set_random_seed(config.seed)
    set_precision(config.precision)
    jit_compile = config.jit_compile and distribution.xla_supported(strategy)
    batch = f"{config.batch_tokens} tokens" if config.batch_tokens else config.batch_size
    print(f"Strategy: {distribution.describe(strategy)}, global batch {batch}. "
          f"Precision: {config.precision}. XLA: {'on' if jit_compile else 'off'}.")
    prepared = prepare_data(config, strategy)
    print(f"Data: {prepared.description}"
          f"{'; streamed from disk' if prepared.streaming else '; tokenized once, cached in memory'}.")
    train_ds, valid_ds, steps_per_epoch = prepared.train, prepared.valid, prepared.steps_per_epoch
    source_tok, target_tok = prepared.source_tokenizer, prepared.target_tokenizer
    valid_pairs, test_pairs = prepared.valid_pairs, prepared.test_pairs

    overrides = dict(config.overrides)
    if config.share_embeddings:
        if source_tok.vocabulary != target_tok.vocabulary:
            raise ValueError(f"--share-embeddings needs one vocabulary, and {config.data_dir} was prepared "
                             "with two: prepare it again with --joint-vocabulary.")
        overrides["share_embeddings"] = True
    with strategy.scope():
        model = build_model(
            config.model, config.preset, source_tok.vocab_size, target_tok.vocab_size,
            max_length=prepared.max_length, **overrides,
        )
        (source_ids, target_in), _ = next(iter(train_ds))
        model((source_ids[:1], target_in[:1]))  # build the weights (BackupAndRestore needs them)
        if config.cpu_dropout:
            use_cpu_dropout(model)
        _compile(model, config, prepared.schedule_steps, jit_compile)
        if getattr(strategy, "cluster_resolver", None) is not None:
            distribution.adapt_to_multi_worker(model, next(iter(train_ds)))

    backup = ResumableBackup(os.path.join(output_dir, "backup"), save_freq=config.backup_every_steps or "epoch")
    backup.set_model(model)
    resumed_from = backup.restore()
    check_backup_fits(backup, config.epochs, steps_per_epoch)  # before anything is written
    source_language, target_language = prepared.languages or (config.source, config.target)
    translator = Translator(model, source_tok, target_tok, prepared.max_length, prepared.max_length,
                            metadata={"source_language": source_language, "target_language": target_language,
                                      "dataset": prepared.description})
    # Early too (evaluators need the vocabularies); after the restore, so a resumed run's copy is its latest state.
    translator.save(os.path.join(output_dir, "translator"))
    report_callback = CorpusReportCallback(prepared.report, verbose=bool(verbose))
    callbacks = [] if config.dataset == "prepared" else [report_callback]  # BLEU next, for the CSV log
    if valid_pairs is not None and config.bleu_sample:
        sample = [(s.decode(), t.decode()) for s, t in valid_pairs.take(config.bleu_sample).as_numpy_iterator()]
        callbacks.append(BleuCallback(translator, sample, verbose=bool(verbose)))
    if config.keep_checkpoints:
        callbacks.append(EpochCheckpoints(os.path.join(output_dir, "checkpoints"), config.keep_checkpoints))
    history_path = os.path.join(output_dir, "history.csv")
    step_timer = StepTimer()
    callbacks += [step_timer, EpochTimer(), keras.callbacks.CSVLogger(history_path, append=resumed_from > 0), keras.callbacks.TerminateOnNaN()]
    if prepared.streaming:
        prepared.report.reset()  # building the model read ahead: count from the first epoch's start
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
    results = {"data": prepared.description, "train_seconds": round(train_seconds, 1),
               "parameters": int(model.count_params()), "steps": backup.completed_steps,
               "steps_per_epoch": steps_per_epoch, "resumed_from_step": resumed_from,
               "replicas": strategy.num_replicas_in_sync, "config": dataclasses.asdict(config),
               "start_up": {**step_timer.summary(), "xla": jit_compile,
                            "batch_shapes": _distinct_shapes(train_ds, valid_ds, steps_per_epoch)},
               "data_counts": prepared.prepared_counts or report_callback.counts or prepared.report.to_dict()}
    if test_pairs is not None:
        if config.max_test_examples:
            test_pairs = test_pairs.take(config.max_test_examples)
        scores = evaluate_bleu(translator, test_pairs)
        results["test"] = {k: scores[k] for k in ("bleu", "bleu_lowercase", "chrf", "num_sentences")}
        # Lists, not tuples: the returned results equal what results.json reads back.
        results["examples"] = [[ref, hyp] for ref, hyp in zip(scores["references"][:3], scores["hypotheses"][:3])]
    results["history"] = history
    write_json(os.path.join(output_dir, "results.json"), results, indent=2)
    return translator, results
