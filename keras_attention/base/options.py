"""The allowed range of every numeric option, shared by `TrainConfig` and the command line.

One table, so that `TrainConfig.from_flat(epochs=0)` and `keras-attention train
--epochs 0` refuse the same values with the same words:

    `epochs` must be an integer >= 1. Received: epochs=0
    argument --epochs: must be an integer >= 1. Received: 0
"""

import argparse
import dataclasses

from keras_attention.base.validation import (
    COUNT,
    COUNT_OR_ZERO,
    POSITIVE,
    PROBABILITY_BELOW_ONE,
    Range,
    check_choice,
    check_range,
)


# The model kinds and size presets `build_model` knows (the presets' sizes
# are in `models.transformer.PRESETS` and `models.seq2seq_rnn.RNN_PRESETS`).
MODEL_KINDS = ("transformer", "bahdanau", "luong", "rnn")
PRESET_NAMES = ("tiny", "small", "base", "big")
# The languages of Multi30k task 1 (`data.load_multi30k`, `--dataset multi30k`).
MULTI30K_LANGUAGES = ("en", "de", "fr", "cs")
# The (source, target) pair of the corpora read by language code, when none is named (`DataConfig`,
# `--source/--target`). The generated dates and the user's files have no languages unless named.
DEFAULT_LANGUAGES = ("en", "de")
LANGUAGE_CODED = ("multi30k", "wmt14", "tfds")
# Pairs per TFRecord shard of a prepared corpus, about (`data.write_prepared_corpus`, `prepare --shard-size`).
SHARD_SIZE = 200_000
# The corpora `train`, `prepare` and `evaluate` read (`DataConfig.dataset`, `--dataset`).
DATASETS = ("multi30k", "dates", "files", "tsv", "tfds", "wmt14", "prepared")
# The user's own corpora: cleaned by default (word limits as Moses' clean-corpus-n).
USER_FILES = ("files", "tsv", "wmt14")
# How a run spreads over devices (`training.get_strategy`, `RunConfig.strategy`, `train --strategy`).
STRATEGIES = ("auto", "default", "mirrored", "multi_worker")
# Keras dtype policies a run may train under (`OptimizationConfig.precision`, `train --precision`).
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
# The weight types CTranslate2's converter accepts (`export_ctranslate2(quantization=...)`).
CTRANSLATE2_QUANTIZATIONS = (
    "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"
)

# Under XLA each length bucket is one more batch shape, compiled once (10-20 s
# for the small models on a CPU); each saves padding on every batch it holds.
# A run gets a bucket for each PAIRS_PER_BUCKET pairs it trains on (epochs
# times pairs), at least 1 and at most MAX_BUCKETS: a short run pads to one
# shape, a long run pays a few compilations for less padding
# (`training.corpus.length_buckets`, `train --length-buckets`).
PAIRS_PER_BUCKET = 10_000
MAX_BUCKETS = 8
# Where "auto" length buckets put their boundaries (`data.auto_bucket_boundaries`, `train --bucket-method`).
BUCKET_METHODS = ("equal_count", "min_padding")
DEFAULT_BUCKET_METHOD = "equal_count"
# The rate each model kind trains at unless `--learning-rate` says (`ModelConfig.recipe_learning_rate`):
# a fixed rate, or "warmup": the Transformer's warm-up schedule, whose peak is PEAK_LEARNING_RATE and
# whose warm-up lasts WARMUP_FRACTION of all steps unless `warmup_steps` says.
RECIPE_LEARNING_RATES = {"transformer": "warmup", "bahdanau": 1e-3, "luong": 1e-3, "rnn": 1e-3}
PEAK_LEARNING_RATE = 1e-3
WARMUP_FRACTION = 0.05
# How the Transformer's rate decays after its warm-up (`OptimizationConfig.lr_schedule`, `train --lr-schedule`).
LR_SCHEDULES = ("inverse_sqrt", "cosine")

# XLA pays for its compilations (about a minute for a run's batch shapes on a
# CPU) only over enough steps: on real batches, each side padded its own way,
# it saves a few percent of a step on a CPU (the Transformer's large matrix
# products run as fast without it). With `jit_compile="auto"` (the default of
# `train`) a run compiles its training step when it trains on at least
# XLA_MIN_PAIRS pairs (epochs times pairs), or on a corpus of unknown size; a
# shorter run trains without XLA (`training.corpus.use_xla`). Chosen at or
# above the largest break-even of any model that
# `scripts/benchmark_xla_break_even.py` measured, with room for the noise of a
# shared machine (the small Transformer's came out at 0.58 and 1.46 million
# pairs in two runs of the same command).
XLA_MIN_PAIRS = 1_500_000

RANGES = {
    # training
    "epochs": COUNT, "batch_size": COUNT, "batch_tokens": COUNT, "learning_rate": POSITIVE,
    "peak_learning_rate": POSITIVE,
    "warmup_steps": COUNT_OR_ZERO, "label_smoothing": PROBABILITY_BELOW_ONE,
    "backup_every_steps": COUNT, "keep_checkpoints": COUNT_OR_ZERO, "bleu_sample": COUNT_OR_ZERO,
    "length_buckets": COUNT, "time_limit_minutes": POSITIVE,
    "cache_limit": COUNT, "dropout": PROBABILITY_BELOW_ONE, "attention_dropout": PROBABILITY_BELOW_ONE,
    "num_layers": COUNT, "d_model": COUNT, "num_heads": COUNT, "intermediate_dim": COUNT,
    # data
    "vocab_size": COUNT, "target_vocab_size": COUNT, "max_length": COUNT, "vocab_sample": COUNT,
    "max_train_examples": COUNT, "max_test_examples": COUNT, "max_examples": COUNT, "max_words": COUNT,
    "max_ratio": Range(float, 1), "shard_size": COUNT,
    # decoding
    # GNMT's length penalty ((5 + length) / 6) ** alpha stays finite in float32 for alpha up to 10.
    "beam_size": COUNT, "length_penalty": Range(float, 0, 10), "temperature": POSITIVE, "top_k": COUNT,
    "top_p": Range(float, 0, 1, low_open=True),
    # export: a SavedModel's version folder
    "version": COUNT,
    # training and sampling: TensorFlow's random ops take an int32 seed
    "seed": Range(int, 0, 2**31 - 1),
}


def check_multi30k_languages(source, target):
    """Raise ValueError unless `source` and `target` are two different languages of Multi30k."""
    check_choice("source", source, MULTI30K_LANGUAGES)
    check_choice("target", target, MULTI30K_LANGUAGES)
    if source == target:
        raise ValueError(f"`source` and `target` (--source, --target) must be different languages. "
                         f"Received: source={source!r}, target={target!r}")


def check_option(name, value):
    """Return `value` if it is None or in `RANGES[name]`, else raise ValueError naming both."""
    return value if value is None else check_range(name, value, RANGES[name])


def check_options(config):
    """`check_option` for every field of the dataclass (or dict) `config` that has a range; a checked
    value is stored back as a Python number (a NumPy scalar would not go into JSON)."""
    fields = config if isinstance(config, dict) else {
        field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    for name, value in list(fields.items()):
        if name in RANGES and value is not None:
            checked = check_option(name, value)
            if isinstance(config, dict):
                config[name] = checked
            else:
                object.__setattr__(config, name, checked)  # frozen dataclasses too


def argument_type(name):
    """An argparse `type` that parses option `name` and checks its range while parsing."""
    allowed = RANGES[name]

    def parse(text):
        try:
            value = allowed.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed.describe()}. Received: {text!r}") from None
        if not allowed.contains(value):
            raise argparse.ArgumentTypeError(f"must be {allowed.describe()}. Received: {text}")
        return value

    parse.__name__ = name  # argparse names the type in some messages
    return parse
