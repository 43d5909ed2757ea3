"""`TrainConfig`: every setting of a training job, checked when it is made."""

import dataclasses
import os

from keras_attention.base.corpus_files import expand_files
from keras_attention.base.options import (BUCKET_METHODS, DATASETS, DEFAULT_BUCKET_METHOD, LR_SCHEDULES,
                                          MODEL_KINDS, PRECISIONS, PRESET_NAMES, STRATEGIES, check_multi30k_languages,
                                          check_options)
from keras_attention.base.validation import check_choice

SPLITS = ("train", "valid", "test")  # what a job reads of its data set (`check_paths`)


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
        time_limit_minutes: a budget of training minutes (validation passes
            excluded): the run stops before an epoch that would end past it
            (see `callbacks.TimeLimit`), and reports the epochs it trained.
            One process only (refused under a multi-worker strategy). None
            (the default) trains all `epochs`.
        batch_tokens: a token budget per batch instead of `batch_size` (each
            length bucket gets as many pairs as fit).
        learning_rate: None for the model's default (the warm-up schedule for
            the Transformer, 1e-3 for RNNs); a number trains at that fixed rate.
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
        strategy, precision: see `training.distribution`.
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
        cpu_dropout: cheaper dropout random numbers under XLA on a CPU (see
            `keras_attention.models.cpu_kernels`; without effect on a GPU).
        cpu_rows: per-token layers (dense, layer norm, attention projections)
            on the `(B * T, d)` rows of their input under XLA on a CPU (see
            `keras_attention.models.cpu_kernels`; without effect on a GPU).
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
            does not depend on the epoch count (a fixed rate, or the
            "inverse_sqrt" schedule with an explicit `warmup_steps`); its
            epochs are shuffled afresh.
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
    time_limit_minutes: float = None
    batch_size: int = 64
    batch_tokens: int = None
    learning_rate: float = None
    warmup_steps: int = None
    peak_learning_rate: float = None
    lr_schedule: str = "inverse_sqrt"
    label_smoothing: float = 0.1
    strategy: str = "auto"
    precision: str = "float32"
    jit_compile: object = "auto"  # True, False or "auto"
    length_buckets: int = None
    bucket_method: str = DEFAULT_BUCKET_METHOD
    cpu_dropout: bool = True
    cpu_rows: bool = True
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
        # Every choice here, before any file is read or vocabulary learned.
        check_choice("model", self.model, MODEL_KINDS)
        check_choice("preset", self.preset, PRESET_NAMES)
        check_choice("dataset", self.dataset, DATASETS)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("strategy", self.strategy, STRATEGIES)
        if self.dataset == "multi30k":
            check_multi30k_languages(self.source, self.target)
        check_choice("bucket_method", self.bucket_method, BUCKET_METHODS)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        if not (isinstance(self.jit_compile, bool) or self.jit_compile == "auto"):
            raise ValueError(f'`jit_compile` must be True, False or "auto". Received: jit_compile={self.jit_compile!r}')
        schedule_flags = [flag for flag, changed in [("--peak-learning-rate", self.peak_learning_rate is not None),
                                                     ("--lr-schedule", self.lr_schedule != "inverse_sqrt")] if changed]
        if schedule_flags and (self.model != "transformer" or self.learning_rate is not None):
            raise ValueError(f"{' and '.join(schedule_flags)} {'are' if len(schedule_flags) > 1 else 'is'} the "
                             "Transformer's warm-up schedule; a fixed rate is --learning-rate. Received: "
                             f"--model {self.model}, --learning-rate {self.learning_rate}, "
                             f"--peak-learning-rate {self.peak_learning_rate}, --lr-schedule {self.lr_schedule}")
        if self.share_embeddings and self.model != "transformer":
            raise ValueError("--share-embeddings is for the Transformer (an RNN's source and target "
                             f"embeddings differ in use). Received: --model {self.model}")
        if self.share_embeddings and not self.joint_vocabulary and self.dataset != "prepared":
            raise ValueError("--share-embeddings needs one vocabulary for both languages: add "
                             "--joint-vocabulary. Received: separate vocabularies")

    def check_paths(self, split="train"):
        """Raise a one-line error naming what the data set lacks to read `split`, or a file or folder this
        config names that does not exist.

        `split` is what the job reads: "train" to train or prepare, "valid"
        or "test" to evaluate. Reads no file and starts no TensorFlow:
        `train` and `prepare` call it first, and the command line before
        TensorFlow's seconds of import.
        """
        check_choice("split", split, SPLITS)
        check_file_flags(self)
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
            raise FileNotFoundError(f"{self.data_dir}: no such folder (data_dir, --data-dir).")
        for name in ("train_files", "valid_files", "test_files"):
            if getattr(self, name):
                expand_files(getattr(self, name), name)


def check_file_flags(config):
    """Raise unless each of `--train-files`, `--valid-files` and `--test-files` given with `--dataset files`
    names two paths (or patterns): the source's and the target's."""
    if config.dataset != "files":
        return
    for name in ("train_files", "valid_files", "test_files"):
        paths, flag = getattr(config, name), "--" + name.replace("_", "-")
        if paths and len(paths) != 2:
            raise ValueError(f"{flag} takes SOURCE TARGET (paths or glob patterns). Received: {flag} {' '.join(paths)}")
