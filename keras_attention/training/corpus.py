"""The training job's data: the splits of a corpus, its vocabularies, and batches ready for `fit`.

`training_data(config, strategy)` is the first step of `train`: it reads the
corpus the `TrainConfig` names, learns (or reads) the vocabularies, and makes
the training and validation batches, cached in memory for a small corpus and
streamed from disk for a large one.
"""

import dataclasses
import time

import tensorflow as tf

from keras_attention import data
from keras_attention.base.options import MAX_BUCKETS, PAIRS_PER_BUCKET, XLA_MIN_PAIRS
from keras_attention.training import distribution
from keras_attention.base.options import DATASETS, USER_FILES

# Pairs whose lengths are measured before training when a corpus streams.
STATS_SAMPLE = 100_000


def use_xla(optimization, pairs, strategy):
    """`(whether the training step compiles with XLA, why)` for a run on `pairs` pairs a pass.

    XLA needs one replica (`distribution.xla_supported`). Then True or
    False in `optimization.jit_compile` decides; "auto" compiles when the run
    trains on at least `XLA_MIN_PAIRS` pairs (epochs times pairs, `pairs`
    None for a corpus of unknown size): a shorter run ends before the faster
    steps repay the compilation.
    """
    if strategy is not None and not distribution.xla_supported(strategy):
        return False, "XLA needs one replica"
    if optimization.jit_compile != "auto":
        return optimization.jit_compile, "--jit" if optimization.jit_compile else "--no-jit"
    if pairs is None:
        return True, "auto: a corpus of unknown size"
    trained = pairs * optimization.epochs
    if trained >= XLA_MIN_PAIRS:
        return True, f"auto: {trained:,} pairs trained on, at least {XLA_MIN_PAIRS:,}"
    return False, (f"auto: {trained:,} pairs trained on, fewer than the {XLA_MIN_PAIRS:,} "
                   "that repay compiling; --jit forces it")


def _resolve_xla(optimization, pairs, strategy, verbose):
    """`optimization` with `jit_compile` decided (True or False, `use_xla`), and the choice printed."""
    xla, why = use_xla(optimization, pairs, strategy)
    if verbose:
        print(f"XLA: {'on' if xla else 'off'} ({why}).")
    return dataclasses.replace(optimization, jit_compile=xla)


def length_buckets(optimization, pairs):
    """How many length buckets the training batches take (`optimization.length_buckets` if set).

    Without XLA a new shape costs little, so `MAX_BUCKETS`; with it, one for
    each `PAIRS_PER_BUCKET` pairs the run trains on (`pairs` a pass, None
    for a corpus of unknown size, which gets `MAX_BUCKETS`).
    """
    if optimization.length_buckets:
        return optimization.length_buckets
    if not optimization.jit_compile or pairs is None:
        return MAX_BUCKETS
    return max(1, min(MAX_BUCKETS, pairs * optimization.epochs // PAIRS_PER_BUCKET))


def load_splits(data_config, report=None, needed=("train", "valid", "test")):
    """(train, valid, test) datasets of string pairs, and a sentence saying what they are.

    `report`, a `data.CorpusReport`, counts what the training split skips.
    Multi30k's splits not `needed` are None (their files need not exist).
    Only the training split is cleaned; validation and test sets are read as
    they are, and an empty side or a line that is not UTF-8 in the user's
    own validation or test files is a `data.CorpusError` (`_evaluation_split`).
    """
    train_options = _train_text_options(data_config, report)
    if data_config.dataset == "multi30k":
        load = lambda split, **kw: data.load_multi30k(  # noqa: E731
            data_config.source, data_config.target, split, data_config.data_dir, **kw)
        splits = (load("train", report=report) if "train" in needed else None,
                  load("val") if "valid" in needed else None,
                  load("test_2016_flickr") if "test" in needed else None)
        return splits, f"Multi30k {data_config.source}->{data_config.target}"
    if data_config.dataset == "dates":
        sizes = {"train": data_config.max_train_examples or 20000, "val": 1000, "test": 1000}
        splits = tuple(data.load_dates(n, split, seed=data_config.seed) for split, n in sizes.items())
        return splits, "the generated dates corpus (human dates -> ISO 8601)"
    if data_config.dataset == "files":  # DataConfig checked that each split names two files
        named = [paths for paths in _file_flags(data_config) if paths]
        if not named:
            raise ValueError("--dataset files needs --train-files SOURCE TARGET (to evaluate: --test-files "
                             "or --valid-files). Received: none of them")
        train_files = data_config.train_files
        splits = (data.load_parallel_files(*train_files, **train_options) if train_files else None,
                  *(_evaluation_split(data.load_parallel_files, *paths) if paths else None
                    for paths in (data_config.valid_files, data_config.test_files)))
        return splits, f"parallel files {named[0][0]} / {named[0][1]}"
    if data_config.dataset == "tsv":
        named = [paths for paths in _file_flags(data_config) if paths]
        if not named:
            raise ValueError("--dataset tsv needs --train-files FILE (to evaluate: --test-files or --valid-files "
                             "FILE). Received: none of them")
        splits = (data.load_tsv(data_config.train_files[0], **train_options) if data_config.train_files else None,
                  *(_evaluation_split(data.load_tsv, paths[0]) if paths else None
                    for paths in (data_config.valid_files, data_config.test_files)))
        return splits, f"TSV file {named[0][0]}"
    if data_config.dataset == "wmt14":
        load = lambda split, **kw: data.load_wmt14(  # noqa: E731
            data_config.source, data_config.target, split, data_config.data_dir, **kw)
        splits = load("train", **train_options), load("validation"), load("test")
        return splits, f"WMT14 {data_config.source}->{data_config.target} ({data_config.data_dir})"
    if data_config.dataset == "tfds":
        load = lambda split: data.load_tfds_translation(  # noqa: E731
            data_config.tfds_name, data_config.source, data_config.target, split, data_config.data_dir
        )
        return (load("train"), load("validation"), load("test")), f"TFDS {data_config.tfds_name}"
    if data_config.dataset == "prepared":
        corpus = data.PreparedCorpus(data_config.data_dir)
        splits = [None] + [data.load_parallel_files(*files) if files else None
                           for files in (corpus.text_split("valid"), corpus.text_split("test"))]
        return tuple(splits), f"prepared corpus {data_config.data_dir} ({corpus.num_pairs:,} pairs)"
    raise ValueError(f"`dataset` must be one of {DATASETS}. Received: dataset={data_config.dataset!r}")


def _evaluation_split(load, *paths):
    """A validation or test split of the user's files, read once now and kept in memory: an empty side or a
    line that is not UTF-8 is a `data.CorpusError` naming the file and line, before any training or
    translating (skipping the pair would change the scores in silence)."""
    pairs = load(*paths, strict=True).cache()
    try:
        for _ in pairs:
            pass
    except tf.errors.InvalidArgumentError as error:
        problem = data.corpus_error(error)
        if problem is None:
            raise
        raise problem from None
    return pairs


def _file_flags(data_config):
    return data_config.train_files, data_config.valid_files, data_config.test_files


def _train_text_options(data_config, report):
    """The streaming loaders' options for the training split of the user's own files."""
    clean = data_config.clean and data_config.dataset in USER_FILES
    return dict(strict=data_config.strict_data, report=report, with_locations=data_config.strict_data,
                max_words=data_config.max_words if clean else None,
                max_ratio=data_config.max_ratio if clean else None)


def _source_side(source, target, *location):
    return source


def _target_side(source, target, *location):
    return target


def _sides(pairs):
    return pairs.map(_source_side), pairs.map(_target_side)


def build_tokenizers(data_config, train_pairs, total):
    """Source and target tokenizers learned from a bounded sample of the training pairs."""
    source_texts, target_texts = _sides(train_pairs)
    options = dict(lower_case=data_config.lower_case, max_sentences=data_config.vocab_sample)
    if data_config.joint_vocabulary:
        both = source_texts.concatenate(target_texts)
        joint = data.SubwordTokenizer.from_dataset(
            both, data_config.target_vocab_size or data_config.vocab_size,
            total=2 * total if total else None, **options)
        return joint, joint
    source_tok = data.SubwordTokenizer.from_dataset(source_texts, data_config.vocab_size, total=total, **options)
    target_size = data_config.target_vocab_size or data_config.vocab_size
    target_tok = data.SubwordTokenizer.from_dataset(target_texts, target_size, total=total, **options)
    return source_tok, target_tok


def _estimate_steps(pairs, stats, optimization):
    """About how many batches one pass over `pairs` pairs gives (for the warm-up)."""
    kept = pairs * (1 - stats.long_pairs / max(stats.pairs, 1)) if stats.action == "drop" else pairs
    if optimization.batch_tokens:
        mean = float(stats.lengths.mean()) if stats.lengths.size else 1.0
        return max(1, int(kept * mean / optimization.batch_tokens))
    return max(1, int(kept / optimization.batch_size))


@dataclasses.dataclass
class TrainingData:
    """What `training_data` makes ready for `fit` (see there)."""

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
    xla: bool  # whether the training step compiles with XLA (`use_xla`)
    prepared_counts: dict = None
    languages: tuple = None


def training_data(config, strategy, verbose=1):
    """Load the corpus, learn or read the vocabularies and make the batches.

    A corpus of at most `config.data.cache_limit` pairs is tokenized once and
    cached, and its exact number of batches counted. A larger one streams:
    nothing that grows with it is kept in memory, the lengths come from its
    first `STATS_SAMPLE` pairs, an epoch is one pass (`steps_per_epoch` is
    None) and the warm-up uses an estimate of the steps. A prepared corpus
    streams from its shards and knows its exact number of batches. Whether
    the training step compiles with XLA is decided here, from the corpus'
    size (`use_xla`; `TrainingData.xla`), since it shapes the batches. With
    `verbose` (as `fit`'s) it prints what it chose; a fallback that changes what
    is trained (partial batches) is printed always.
    """
    data_config = config.data
    report = data.CorpusReport()
    (train_pairs, valid_pairs, test_pairs), description = load_splits(data_config, report)
    if train_pairs is None and data_config.dataset != "prepared":
        raise ValueError(f"Training needs a training split; {description} has none: give --train-files.")
    workers = distribution.num_workers(strategy)
    if data_config.dataset == "prepared":
        return _prepared_data(config, valid_pairs, test_pairs, description, report, strategy, verbose)
    total = report.lines if report.lines is not None else int(train_pairs.cardinality())
    total = None if total is not None and total < 0 else total
    if data_config.max_train_examples:
        train_pairs = train_pairs.take(data_config.max_train_examples)
        total = min(total, data_config.max_train_examples) if total else data_config.max_train_examples
    optimization = _resolve_xla(config.optimization, total, strategy, verbose)  # jit_compile: True or False now
    streaming = total is None or total > data_config.cache_limit
    if streaming and workers > 1:
        raise ValueError(
            f"A corpus of more than {data_config.cache_limit:,} pairs streams, and under "
            "MultiWorkerMirroredStrategy each worker needs a known number of batches: prepare it "
            "once with `keras-attention prepare` and train with --data-dir PREPARED. "
            f"Received: {total or 'an unknown number of'} pairs")

    started = time.time()
    source_tok, target_tok = build_tokenizers(data_config, train_pairs, total)
    if verbose:
        print(f"Vocabularies: {source_tok.vocab_size} source and {target_tok.vocab_size} target tokens"
              f"{' (joint)' if source_tok is target_tok else ''}, from at most {data_config.vocab_sample:,} "
              f"sentences ({time.time() - started:.0f} s).")
    report.reset()  # count the training pass only, not the vocabulary's sample
    buckets = length_buckets(optimization, total)
    if optimization.jit_compile and verbose:
        print(f"Length buckets: {buckets} (batch shapes XLA compiles for)"
              f"{'' if optimization.length_buckets else ', chosen from the pairs the run trains on'}, "
              f"{optimization.bucket_method.replace('_', '-')} boundaries.")

    def batches(drop_remainder):
        return data.make_translation_dataset(
            train_pairs, source_tok, target_tok, None if optimization.batch_tokens else optimization.batch_size,
            batch_tokens=optimization.batch_tokens, max_length=data_config.max_length, bucket_boundaries=buckets,
            bucket_method=optimization.bucket_method, pad_to_bucket_boundary=optimization.jit_compile,
            drop_remainder=drop_remainder, shuffle=True, seed=data_config.seed, return_stats=True,
            cache=not streaming, stats_sample=STATS_SAMPLE if streaming else None, report=report,
            strict=data_config.strict_data and len(train_pairs.element_spec) == 3,
        )

    # Under XLA every new batch shape costs a compilation: pad each batch to its
    # bucket's boundary and drop the ragged last batch, so a few shapes recur.
    train_ds, stats = batches(drop_remainder=optimization.jit_compile)
    if streaming:
        report.reset()  # the length sample read the corpus' head: count from the first epoch on
        steps_per_epoch, schedule_steps = None, _estimate_steps(total or STATS_SAMPLE, stats, optimization)
    else:
        train_ds, steps_per_epoch = _counted(train_ds)
        if steps_per_epoch == 0 and optimization.jit_compile and stats.pairs > stats.long_pairs:
            # A small corpus whose length buckets each hold less than a batch: keep the partial ones.
            train_ds, steps_per_epoch = _counted(batches(drop_remainder=False)[0])
            print(f"The training data fills no whole batch of {_batch_words(optimization)} in any length bucket "
                  f"({stats.pairs - stats.long_pairs} pairs): training on partial batches, "
                  f"{steps_per_epoch} an epoch.")
        schedule_steps = steps_per_epoch
    if steps_per_epoch == 0:
        raise ValueError(f"The training data gives no batch ({stats}); raise --max-length "
                         f"(now {data_config.max_length}) or give more data.")
    valid_ds = _valid_batches(optimization, valid_pairs, source_tok, target_tok, data_config.max_length)
    return TrainingData(train_ds, valid_ds, valid_pairs, test_pairs, source_tok, target_tok,
                        steps_per_epoch, schedule_steps, data_config.max_length, description, report,
                        streaming, optimization.jit_compile)


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


def _batch_words(optimization):
    return f"{optimization.batch_tokens} tokens" if optimization.batch_tokens else f"{optimization.batch_size} pairs"


def _prepared_data(config, valid_pairs, test_pairs, description, report, strategy, verbose):
    data_config = config.data
    corpus = data.PreparedCorpus(data_config.data_dir)
    optimization = _resolve_xla(config.optimization, corpus.num_pairs, strategy, verbose)
    source_tok, target_tok = corpus.tokenizers()
    boundaries = corpus.bucket_boundaries(length_buckets(optimization, corpus.num_pairs),
                                          method=optimization.bucket_method)
    batching = dict(batch_size=None if optimization.batch_tokens else optimization.batch_size,
                    batch_tokens=optimization.batch_tokens, bucket_boundaries=boundaries,
                    pad_to_bucket_boundary=optimization.jit_compile,
                    num_workers=distribution.num_workers(strategy))
    steps_per_epoch = corpus.steps_per_epoch(**batching)
    if steps_per_epoch == 0:
        raise ValueError(f"{data_config.data_dir}: {corpus.num_pairs:,} pairs give no full batch per worker; "
                         f"use a smaller --batch-size (now {optimization.batch_size}) or --batch-tokens.")
    # Repeated, with a fixed number of steps an epoch: every worker does the same number.
    train_ds = corpus.dataset(**batching, seed=data_config.seed, repeat=True,
                              worker_index=distribution.worker_index(strategy))
    counts = corpus.manifest.get("counts", {})
    skipped = {k: v for k, v in counts.items() if k not in ("lines", "read", "kept") and v}
    if verbose:
        print(f"Prepared corpus: {corpus.num_pairs:,} pairs in {len(corpus.files)} shards, "
              f"{steps_per_epoch} steps an epoch; skipped when prepared: {skipped or 'none'}.")
    max_length = max(corpus.max_length)
    valid_ds = _valid_batches(optimization, valid_pairs, source_tok, target_tok, max_length)
    return TrainingData(train_ds, valid_ds, valid_pairs, test_pairs, source_tok, target_tok,
                        steps_per_epoch, steps_per_epoch, max_length, description, report, True,
                        optimization.jit_compile, prepared_counts=counts, languages=(
                            corpus.manifest.get("source_language", data_config.source),
                            corpus.manifest.get("target_language", data_config.target)))


def _valid_batches(optimization, valid_pairs, source_tok, target_tok, max_length):
    if valid_pairs is None:
        return None
    # The evaluation step runs without XLA (see `recipe._compile`), where a new
    # shape costs little: batches of similar lengths, padded to their longest pair.
    valid_ds = data.make_translation_dataset(
        valid_pairs, source_tok, target_tok, optimization.batch_size, max_length=max_length,
        on_long="truncate", bucket_boundaries="auto",
    )
    return valid_ds.apply(tf.data.experimental.assert_cardinality(len(batch_shapes(valid_ds))))
