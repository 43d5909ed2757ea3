"""From the parsed flags to the `TrainConfig` of `train` and the `DataConfig` of `prepare` and `evaluate`."""

from keras_attention.base.corpus_files import is_prepared
from keras_attention.cli.arguments import TRANSFORMER_SIZE_FLAGS
from keras_attention.training.config import DataConfig, TrainConfig


# What `prepare` fixed in a prepared corpus, which `train --data-dir PREPARED` reads and cannot change.
PREPARED_FLAGS = {"source": "--source", "target": "--target", "vocab_size": "--vocab-size",
                  "lower_case": "--lower-case", "joint_vocabulary": "--joint-vocabulary",
                  "vocab_sample": "--vocab-sample", "max_length": "--max-length",
                  "max_train_examples": "--max-train-examples", "strict_data": "--strict-data",
                  "no_clean": "--no-clean", "max_words": "--max-words", "max_ratio": "--max-ratio"}


def config_from_args(args):
    """The `TrainConfig` of `train`'s flags; flags that contradict each other or the corpus are refused."""
    given = getattr(args, "given", frozenset())
    if args.batch_tokens and "batch_size" in given:
        raise ValueError("--batch-size and --batch-tokens both set the batch: give one. "
                         f"Received: --batch-size {args.batch_size} --batch-tokens {args.batch_tokens}")
    if dataset_name(args) == "prepared":
        fixed = [flag for name, flag in PREPARED_FLAGS.items() if name in given]
        if fixed:
            raise ValueError(f"{', '.join(fixed)}: fixed by the prepared corpus in {args.data_dir} when it was "
                             "prepared; leave them out, or prepare the corpus again with them.")
    return TrainConfig.from_flat(
        model=args.model, preset=args.preset, **_reading_fields(args),
        epochs=args.epochs, time_limit_minutes=args.time_limit_minutes,
        batch_size=args.batch_size, batch_tokens=args.batch_tokens,
        learning_rate=args.learning_rate, warmup_steps=args.warmup_steps,
        peak_learning_rate=args.peak_learning_rate, lr_schedule=args.lr_schedule,
        label_smoothing=args.label_smoothing, strategy=args.strategy, precision=args.precision,
        jit_compile=False if args.no_jit else True if args.jit else "auto", length_buckets=args.length_buckets,
        bucket_method=args.bucket_method,
        cpu_dropout=not args.no_cpu_dropout, cpu_rows=not args.no_cpu_rows, output_dir=args.output,
        max_test_examples=args.max_test_examples,
        backup_every_steps=args.backup_every_steps, keep_backup=args.keep_backup,
        resume=args.resume, overwrite=args.overwrite,
        keep_checkpoints=args.keep_checkpoints, bleu_sample=args.bleu_sample, cache_limit=args.cache_limit,
        share_embeddings=args.share_embeddings, overrides=_model_overrides(args),
    )


def _model_overrides(args):
    """`--dropout`, `--attention-dropout` and the Transformer's sizes, as the model arguments they set."""
    if args.attention_dropout is not None and args.model != "transformer":
        raise ValueError(f"--attention-dropout is for the Transformer (the RNNs' attention has no dropout). "
                         f"Received: --model {args.model}")
    sizes = [flag for flag, name in TRANSFORMER_SIZE_FLAGS.items() if getattr(args, name) is not None]
    if sizes and args.model != "transformer":
        raise ValueError(f"{', '.join(sizes)}: sizes of the Transformer (an RNN's sizes come from its --preset). "
                         f"Received: --model {args.model}")
    names = ("dropout", "attention_dropout", *TRANSFORMER_SIZE_FLAGS.values())
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def data_config(args):
    """The `DataConfig` naming only the corpus (for `evaluate`)."""
    return DataConfig(**_corpus_fields(args))


def corpus_config(args):
    """The `DataConfig` of `prepare`: the corpus, its reading and its vocabulary."""
    return DataConfig(**_reading_fields(args))


def _corpus_fields(args):
    """Which corpus: the data flags that `train`, `prepare` and `evaluate` share."""
    return dict(dataset=dataset_name(args), source=args.source, target=args.target, data_dir=args.data_dir,
                train_files=_tuple(args.train_files), valid_files=_tuple(args.valid_files),
                test_files=_tuple(args.test_files), tfds_name=args.tfds_name)


def _reading_fields(args):
    """The corpus, how it is read and its vocabulary: the flags `train` and `prepare` share."""
    return dict(**_corpus_fields(args), vocab_size=args.vocab_size, lower_case=args.lower_case,
                max_length=args.max_length, max_train_examples=args.max_train_examples, seed=args.seed,
                strict_data=args.strict_data, clean=not args.no_clean, max_words=args.max_words,
                max_ratio=args.max_ratio, vocab_sample=args.vocab_sample,
                joint_vocabulary=args.joint_vocabulary)


def dataset_name(args):
    """--dataset, or what --data-dir holds when it is not given."""
    if args.dataset:
        return args.dataset
    return "prepared" if is_prepared(args.data_dir) else "multi30k"


def _tuple(values):
    return tuple(values) if values else None
