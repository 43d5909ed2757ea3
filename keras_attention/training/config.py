"""`TrainConfig`: every setting of a training job, in four sections, checked when it is made.

    config = TrainConfig(
        data=DataConfig(dataset="multi30k", source="en", target="de"),
        model=ModelConfig(kind="transformer", preset="small"),
        optimization=OptimizationConfig(epochs=10),
        run=RunConfig(output_dir="runs/en-de"),
    )

`prepare` and `load_splits` (and the command line's `evaluate`) take a `DataConfig` alone. `TrainConfig.from_flat`
builds one from the command line's flat names (`model="transformer",
epochs=10, ...`), as `results.json` records it (`TrainConfig.flat`).
"""

import dataclasses
import os

from keras_attention.base.corpus_files import expand_files
from keras_attention.base.options import (BUCKET_METHODS, DATASETS, DEFAULT_BUCKET_METHOD, DEFAULT_LANGUAGES,
                                          LANGUAGE_CODED, LR_SCHEDULES, MODEL_KINDS, PRECISIONS, PRESET_NAMES,
                                          RECIPE_LEARNING_RATES, STRATEGIES, check_multi30k_languages, check_options)
from keras_attention.base.validation import check_choice, python_number

SPLITS = ("train", "valid", "test")  # what a job reads of its data set (`DataConfig.check_paths`)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which corpus a job reads, how, and its vocabularies: all that `prepare` and `load_splits` need.

    Attributes:
        dataset: "multi30k", "dates" (generated), "files" (aligned text
            files, shards and globs allowed), "tsv" (tab-separated files),
            "tfds" (a TFDS data set), "wmt14" (local WMT14 en-de files in
            `data_dir`) or "prepared" (a folder from `keras-attention prepare`
            in `data_dir`).
        source, target: language codes (Multi30k: en, de, fr, cs; TFDS: the
            data set's feature names). Multi30k, WMT14 and TFDS default to
            en -> de; for the dates and the user's files they only label the
            translator (None: unknown). A prepared corpus has its own.
        data_dir: folder holding the corpus (Multi30k files, TFDS data).
        train_files, valid_files, test_files: for "files": (source, target)
            paths or glob patterns; for "tsv": a 1-tuple with the path.
        tfds_name: for "tfds", e.g. "wmt14_translate/de-en".
        vocab_size: WordPiece vocabulary size per language.
        target_vocab_size: a different size for the target side, or None.
        lower_case: lower-case text before tokenizing.
        joint_vocabulary: one vocabulary learned from both sides, for both.
        vocab_sample: the vocabularies learn from at most this many training
            sentences, spread over the corpus.
        max_length: longest tokenized sentence (markers included); longer
            training pairs are dropped, longer test sources truncated.
        clean: for the user's corpora ("files", "tsv", "wmt14"), skip pairs
            over `max_words` words or with a word ratio over `max_ratio`.
        max_words, max_ratio: the cleaning limits.
        strict_data: a bad training line (not UTF-8, empty side, too long,
            too unequal) is an error naming file and line, instead of being
            skipped and counted.
        max_train_examples: use only the first N training pairs (quick runs).
        max_test_examples: score only the first N test pairs after training
            (quick runs); None for the whole test split.
        cache_limit: corpora of at most this many pairs are tokenized once
            and kept in memory; larger ones stream from disk each epoch.
        seed: the shuffling order, the generated corpus and, in `train`, the
            initial weights.
    """

    dataset: str = "multi30k"
    source: str = None
    target: str = None
    data_dir: str = None
    train_files: tuple = None
    valid_files: tuple = None
    test_files: tuple = None
    tfds_name: str = None
    vocab_size: int = 8000
    target_vocab_size: int = None
    lower_case: bool = False
    joint_vocabulary: bool = False
    vocab_sample: int = 1_000_000
    max_length: int = 64
    clean: bool = True
    max_words: int = 250
    max_ratio: float = 9.0
    strict_data: bool = False
    max_train_examples: int = None
    max_test_examples: int = None
    cache_limit: int = 200_000
    seed: int = 0

    def __post_init__(self):
        for name in ("train_files", "valid_files", "test_files"):  # a list (from JSON, argparse) as a tuple
            if getattr(self, name):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.dataset in LANGUAGE_CODED:  # the languages pick the files
            for name, default in zip(("source", "target"), DEFAULT_LANGUAGES):
                object.__setattr__(self, name, getattr(self, name) or default)
        check_options(self)  # the ranges the command line checks too
        check_choice("dataset", self.dataset, DATASETS)
        if self.dataset == "multi30k":
            check_multi30k_languages(self.source, self.target)
        check_file_flags(self)

    def check_paths(self, split="train"):
        """Raise a one-line error naming what the data set lacks to read `split`, or a file or folder this
        config names that does not exist.

        `split` is what the job reads: "train" to train or prepare, "valid"
        or "test" to evaluate. Reads no file and starts no TensorFlow:
        `train` and `prepare` call it first, and the command line before
        TensorFlow's seconds of import.
        """
        check_choice("split", split, SPLITS)
        if self.dataset in ("files", "tsv"):
            name = f"{split}_files"
            if not getattr(self, name):
                flag, what = "--" + name.replace("_", "-"), "SOURCE TARGET" if self.dataset == "files" else "FILE"
                purpose = "the training split" if split == "train" else f"the split evaluated (--split {split})"
                raise ValueError(f"--dataset {self.dataset} needs {flag} {what}: {purpose}. Received: no {flag}")
        if self.dataset in ("wmt14", "prepared") and self.data_dir is None:
            what = "the WMT14 files" if self.dataset == "wmt14" else "a folder made by `keras-attention prepare`"
            raise ValueError(f"--dataset {self.dataset} reads a local folder: give --data-dir FOLDER ({what}). "
                             "Received: no --data-dir")
        if self.dataset == "tfds" and not self.tfds_name:
            raise ValueError("--dataset tfds needs --tfds-name NAME (for example wmt14_translate/de-en). "
                             "Received: no --tfds-name")
        if self.data_dir is not None and self.dataset != "tfds" and not os.path.isdir(self.data_dir):  # TFDS makes it
            if os.path.exists(self.data_dir):
                raise NotADirectoryError(f"{self.data_dir}: a file, not a folder (data_dir, --data-dir): give the "
                                         "folder that holds the corpus.")
            raise FileNotFoundError(f"{self.data_dir}: no such folder (data_dir, --data-dir).")
        for name in ("train_files", "valid_files", "test_files"):
            if getattr(self, name):
                expand_files(getattr(self, name), name)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The model a job trains.

    Attributes:
        kind: "transformer", "bahdanau", "luong" or "rnn" (`models.build_model`).
        preset: "tiny", "small", "base" or "big".
        overrides: model constructor arguments that replace the preset's
            (a copy of the dict given).
        share_embeddings: one embedding matrix for the source, the target and
            the output projection (Transformer only; needs one vocabulary:
            `DataConfig.joint_vocabulary`, or a prepared corpus made with it).
        cpu_dropout: cheaper dropout random numbers under XLA on a CPU (see
            `keras_attention.models.cpu_kernels`; without effect on a GPU).
        cpu_rows: per-token layers (dense, layer norm, attention projections)
            on the `(B * T, d)` rows of their input under XLA on a CPU (see
            `keras_attention.models.cpu_kernels`; without effect on a GPU).
    """

    kind: str = "transformer"
    preset: str = "small"
    overrides: dict = dataclasses.field(default_factory=dict, hash=False)
    share_embeddings: bool = False
    cpu_dropout: bool = True
    cpu_rows: bool = True

    def __post_init__(self):
        # A copy (the caller's dict may change), with NumPy's numbers as Python's, which JSON writes.
        overrides = {name: python_number(value) for name, value in (self.overrides or {}).items()}
        object.__setattr__(self, "overrides", overrides)
        check_options(self)
        check_options(self.overrides)  # dropout and sizes: the ranges the command line checks
        check_choice("model", self.kind, MODEL_KINDS)
        check_choice("preset", self.preset, PRESET_NAMES)
        if self.share_embeddings and self.kind != "transformer":
            raise ValueError("--share-embeddings is for the Transformer (an RNN's source and target "
                             f"embeddings differ in use). Received: --model {self.kind}")

    @property
    def recipe_learning_rate(self):
        """The rate `train` uses unless told: a number, or "warmup" (the Transformer's warm-up schedule)."""
        return RECIPE_LEARNING_RATES[self.kind]


@dataclasses.dataclass(frozen=True)
class OptimizationConfig:
    """How a job trains: epochs, batches, learning rate, loss, precision and XLA.

    Attributes:
        epochs, batch_size: as in `fit` (batch_size is the global batch).
        time_limit_minutes: a budget of training minutes (validation passes
            excluded): the run stops before an epoch that would end past it
            (see `callbacks.TimeLimit`), and reports the epochs it trained.
            One process only (refused under a multi-worker strategy). None
            (the default) trains all `epochs`.
        batch_tokens: a token budget per batch instead of `batch_size` (each
            length bucket gets as many pairs as fit).
        learning_rate: None for the model's default (`ModelConfig.
            recipe_learning_rate`: the warm-up schedule for the Transformer,
            a fixed rate for RNNs); a number trains at that fixed rate.
        warmup_steps: Transformer warm-up; None means 5% of all steps.
        peak_learning_rate: the Transformer schedule's rate at the end of the
            warm-up; None means 1e-3. Larger batches (`batch_tokens`) usually
            take a larger peak.
        lr_schedule: how the Transformer's rate decays after the warm-up:
            "inverse_sqrt" (the default; as 1/sqrt(step), the paper's) or
            "cosine" (half a cosine, to zero at the run's last step, epochs
            times steps per epoch; Loshchilov and Hutter, 2017). A streamed
            corpus' steps per epoch are estimated before its first pass: its
            rate may reach zero a few steps early or stop short of it.
        label_smoothing: epsilon of the loss.
        precision: a Keras dtype policy (see `training.distribution`).
        jit_compile: compile the training step with XLA: True, False, or
            "auto" (the default): only when the run trains on at least
            `base.options.XLA_MIN_PAIRS` pairs, epochs times pairs (see
            `training.corpus.use_xla`). XLA is used with one replica only.
        length_buckets: how many length buckets the training batches take
            (under XLA, the batch shapes compiled); None chooses from the
            number of pairs the run trains on (see
            `training.corpus.length_buckets`).
        bucket_method: where those buckets' boundaries go: "equal_count"
            (the default: about as many pairs in each) or "min_padding" (the
            fewest padded tokens; see `data.auto_bucket_boundaries`).
    """

    epochs: int = 10
    time_limit_minutes: float = None
    batch_size: int = 64
    batch_tokens: int = None
    learning_rate: float = None
    warmup_steps: int = None
    peak_learning_rate: float = None
    lr_schedule: str = "inverse_sqrt"
    label_smoothing: float = 0.1
    precision: str = "float32"
    jit_compile: object = "auto"  # True, False or "auto"
    length_buckets: int = None
    bucket_method: str = DEFAULT_BUCKET_METHOD

    def __post_init__(self):
        check_options(self)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("bucket_method", self.bucket_method, BUCKET_METHODS)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        if not (isinstance(self.jit_compile, bool) or self.jit_compile == "auto"):
            raise ValueError(f'`jit_compile` must be True, False or "auto". Received: jit_compile={self.jit_compile!r}')


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Where a job writes, on which devices, and how it survives being stopped.

    Attributes:
        output_dir: where checkpoints, the translator and results go (other
            tasks than the chief of a multi-worker cluster use a subfolder).
        strategy: "auto", "default", "mirrored" or "multi_worker" (see
            `training.distribution`).
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
            does not depend on the epoch count (a fixed rate, or the
            "inverse_sqrt" schedule with an explicit `warmup_steps`); its
            epochs are shuffled afresh.
        keep_checkpoints: keep the weights of the last N epochs in
            `checkpoints/` for checkpoint averaging (0: none).
        bleu_sample: validation sentences decoded by the BLEU callback.
    """

    output_dir: str = "runs/latest"
    strategy: str = "auto"
    backup_every_steps: int = None
    resume: bool = False
    overwrite: bool = False
    keep_backup: bool = False
    keep_checkpoints: int = 5
    bleu_sample: int = 200

    def __post_init__(self):
        check_options(self)
        check_choice("strategy", self.strategy, STRATEGIES)


SECTIONS = {"data": DataConfig, "model": ModelConfig, "optimization": OptimizationConfig, "run": RunConfig}
# The flat name (command line, `results.json`) of a section field where it differs from the field's.
FLAT_NAMES = {("model", "kind"): "model"}


def _flat_names():
    """`{flat name: (section, field)}` for every field of every section."""
    names = {}
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            names[FLAT_NAMES.get((section, field.name), field.name)] = section, field.name
    return names


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (the CLI's `train` flags), in sections.

    Each section checks its own values when it is made; `TrainConfig` checks
    what ties them together (the schedule flags and the model's learning
    rate, shared embeddings and the vocabulary), so a bad choice fails before
    any file is read.

    Attributes:
        data: a `DataConfig`: the corpus, its reading and its vocabularies.
        model: a `ModelConfig`: the model kind, its preset and overrides.
        optimization: an `OptimizationConfig`: epochs, batches, learning
            rate, precision, XLA.
        run: a `RunConfig`: output folder, strategy, backups, checkpoints.

    `data.seed` seeds the whole run: the shuffling, a generated corpus and the
    initial weights.

    Example:

    >>> config = TrainConfig.from_flat(model="bahdanau", preset="tiny", epochs=2)
    >>> config.model.kind, config.optimization.epochs, config.data.dataset
    ('bahdanau', 2, 'multi30k')
    >>> config.replace(epochs=3).optimization.epochs
    3
    """

    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    optimization: OptimizationConfig = dataclasses.field(default_factory=OptimizationConfig)
    run: RunConfig = dataclasses.field(default_factory=RunConfig)

    def __post_init__(self):
        for section, cls in SECTIONS.items():
            if not isinstance(getattr(self, section), cls):
                raise TypeError(f"`{section}` must be of type {cls.__name__}. "
                                f"Received: {section}={getattr(self, section)!r}")
        model, optimization = self.model, self.optimization
        changed = {"--peak-learning-rate": optimization.peak_learning_rate is not None,
                   "--lr-schedule": optimization.lr_schedule != "inverse_sqrt"}
        schedule_flags = [flag for flag, was_changed in changed.items() if was_changed]
        if schedule_flags and (model.recipe_learning_rate != "warmup" or optimization.learning_rate is not None):
            raise ValueError(f"{' and '.join(schedule_flags)} {'are' if len(schedule_flags) > 1 else 'is'} the "
                             "Transformer's warm-up schedule; a fixed rate is --learning-rate. Received: "
                             f"--model {model.kind}, --learning-rate {optimization.learning_rate}, "
                             f"--peak-learning-rate {optimization.peak_learning_rate}, "
                             f"--lr-schedule {optimization.lr_schedule}")
        if model.share_embeddings and not self.data.joint_vocabulary and self.data.dataset != "prepared":
            raise ValueError("--share-embeddings needs one vocabulary for both languages: add "
                             "--joint-vocabulary. Received: separate vocabularies")

    @classmethod
    def from_flat(cls, **fields):
        """A `TrainConfig` from flat names: the command line's (`model="luong", epochs=3, ...`).

        Also reads the `config` of a `results.json`, 0.3's included. An
        unknown name is an error naming it.
        """
        names = _flat_names()
        unknown = sorted(set(fields) - set(names))
        if unknown:
            raise TypeError(f"Unknown training settings: {', '.join(unknown)}. Received: "
                            + ", ".join(f"{name}={fields[name]!r}" for name in unknown))
        sections = {section: {} for section in SECTIONS}
        for name, value in fields.items():
            section, field = names[name]
            sections[section][field] = value
        return cls(**{section: SECTIONS[section](**values) for section, values in sections.items()})

    def flat(self):
        """Every setting under its flat name (what `results.json` records as `config`)."""
        flat = {name: getattr(getattr(self, section), field) for name, (section, field) in _flat_names().items()}
        return dict(flat, overrides=dict(flat["overrides"]))

    def replace(self, **changes):
        """A checked copy with some settings changed: by flat name (`epochs=3`, `model="luong"`), or whole
        sections (`model=ModelConfig(...)`)."""
        sections = {name: changes.pop(name) for name, cls in SECTIONS.items()
                    if isinstance(changes.get(name), cls)}
        flat = type(self)(**{**{name: getattr(self, name) for name in SECTIONS}, **sections}).flat()
        return type(self).from_flat(**{**flat, **changes})

    def check_paths(self, split="train"):
        """`DataConfig.check_paths` of the data section."""
        self.data.check_paths(split)


def check_file_flags(config):
    """Raise unless each of `--train-files`, `--valid-files` and `--test-files` given with `--dataset files`
    names two paths (or patterns): the source's and the target's; or if they, or `--tfds-name`, are given
    with a data set that does not read them."""
    named = [name for name in ("train_files", "valid_files", "test_files") if getattr(config, name)]
    if named and config.dataset not in ("files", "tsv"):
        flags = ", ".join("--" + name.replace("_", "-") for name in named)
        raise ValueError(f"{flags}: your own files are read with --dataset files (or tsv): add it. The data set "
                         f"now is {config.dataset}, which reads its own files.")
    if config.tfds_name and config.dataset != "tfds":
        raise ValueError(f"--tfds-name is read with --dataset tfds: add it. The data set now is {config.dataset}.")
    if config.dataset != "files":
        return
    for name in ("train_files", "valid_files", "test_files"):
        paths, flag = getattr(config, name), "--" + name.replace("_", "-")
        if paths and len(paths) != 2:
            raise ValueError(f"{flag} takes SOURCE TARGET (paths or glob patterns). Received: {flag} {' '.join(paths)}")
