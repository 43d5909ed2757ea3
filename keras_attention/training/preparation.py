"""`keras-attention prepare`: a corpus tokenized once into sharded TFRecords for `train --data-dir`.

The same data options as `train` (dataset, files, cleaning, vocabulary) are
read from a `DataConfig`, the data section of a `TrainConfig`; the vocabularies are learned from a bounded sample,
then `data.write_prepared_corpus` streams the training pairs into shuffled shards.
The validation and test sets (small) are written next to them as text.
"""

import time

import tensorflow as tf

from keras_attention import data
from keras_attention.base.options import SHARD_SIZE
from keras_attention.data.records import check_output
from keras_attention.training.config import DataConfig
from keras_attention.training.corpus import build_tokenizers, load_splits


def prepare(data_config, output_dir, shard_size=SHARD_SIZE, overwrite=False):
    """Prepare `data_config`'s training data in `output_dir`; return the manifest.

    Args:
        data_config: a `DataConfig`: the corpus, its cleaning, its
            vocabularies, `max_length` and the shuffling `seed`.
        output_dir: str. A new or empty folder.
        shard_size: int. Pairs per shard, about. Defaults to 200,000.
        overwrite: bool. Replace a prepared corpus in `output_dir`.

    Returns:
        The manifest dict.

    Raises:
        ValueError: bad options, a folder that already holds something, or
            (`strict_data`) a `data.CorpusError` naming a bad line. A
            failure leaves nothing behind and, with `overwrite`, keeps the
            corpus that was there.
    """
    if not isinstance(data_config, DataConfig):
        raise TypeError("`prepare` takes a DataConfig (a TrainConfig's is its `data`). "
                        f"Received: {type(data_config).__name__}")
    if data_config.dataset == "prepared":
        raise ValueError("The data is already prepared. Received: --dataset prepared")
    data_config.check_paths()
    check_output(output_dir, overwrite)  # before the corpus is read: a refusal costs nothing
    try:
        return _prepare(data_config, output_dir, shard_size, overwrite)
    except tf.errors.InvalidArgumentError as error:
        problem = data.corpus_error(error)
        if problem is None:
            raise
        raise problem from None


def _prepare(data_config, output_dir, shard_size, overwrite):
    started = time.time()
    report = data.CorpusReport()
    (train_pairs, valid_pairs, test_pairs), description = load_splits(data_config, report)
    if train_pairs is None:
        raise ValueError(f"Preparing needs a training split; {description} has none: give --train-files.")
    if len(train_pairs.element_spec) == 3:  # locations are for strict errors only
        train_pairs = train_pairs.map(lambda s, t, where: (s, t))
    total = report.lines if report.lines is not None else int(train_pairs.cardinality())
    total = total if total and total > 0 else None
    if data_config.max_train_examples:
        train_pairs = train_pairs.take(data_config.max_train_examples)
        total = min(total or data_config.max_train_examples, data_config.max_train_examples)
    if total is None:
        raise ValueError(f"{description}: cannot tell how many pairs it holds; give --max-train-examples.")
    source_tok, target_tok = build_tokenizers(data_config, train_pairs, total)
    print(f"Vocabularies: {source_tok.vocab_size} source and {target_tok.vocab_size} target tokens "
          f"({time.time() - started:.0f} s).")
    report.reset()
    return data.write_prepared_corpus(
        train_pairs, source_tok, target_tok, output_dir, data_config.max_length, num_pairs=total,
        shard_size=shard_size, seed=data_config.seed, report=report, valid_pairs=valid_pairs,
        test_pairs=test_pairs, overwrite=overwrite, metadata={
            "data": description, "source_language": data_config.source, "target_language": data_config.target,
            "joint_vocabulary": source_tok is target_tok,
        },
    )
