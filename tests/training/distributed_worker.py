"""Worker script for the distribution tests (run in a subprocess: devices are set before TF starts).

    python distributed_worker.py replicas OUT.json
        Two logical CPU devices. For a small Transformer and a Bahdanau model,
        one epoch on one device and one epoch under MirroredStrategy on both
        devices, from the same initial weights and the same global batches;
        writes losses and the largest weight difference per case.

    python distributed_worker.py worker OUT.npz
        One epoch under the strategy named by $STRATEGY ("multi_worker" reads
        TF_CONFIG; "default" gives the one-device reference, which the test runs
        in its own process: `train_worker(OUT, "default")`); writes the final
        weights (named `weights/<path>`), the paths of those to compare with one
        device (`compared`), and the loss.

    python distributed_worker.py shards OUT.json PREPARED_FOLDER...
        Under the multi-worker strategy (TF_CONFIG), reads one epoch of each
        prepared corpus in turn through `experimental_distribute_dataset`, as
        `fit` does; writes, for each, the source rows this worker saw.

The batches have uneven padding: in every global batch the first half has
short targets and the second half long ones, so the two replicas see very
different numbers of real tokens.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

if __name__ == "__main__" and sys.argv[1] == "replicas":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

from keras_attention.models import Seq2SeqRNN, Transformer  # noqa: E402
from keras_attention.training import MaskedSparseCrossEntropy, MaskedTokenAccuracy  # noqa: E402
from keras_attention.training import optimizers  # noqa: E402
from keras_attention.training.distribution import adapt_to_multi_worker, get_strategy  # noqa: E402

GLOBAL_BATCH, BATCHES, SOURCE_LEN, TARGET_LEN, VOCAB = 8, 3, 7, 9, 40


def matches_one_device(path):
    """Whether the weight at `path` is compared with the one-device run.

    Not the attention key biases: a key bias adds the same q.b_k to every score
    of a query, which the softmax ignores, so its gradient is zero but for
    round-off, and Adam scales that round-off up to steps of either sign.
    """
    return not path.endswith("key/bias")


def make_data():
    """`((source, target_in), target_out)` global batches with uneven padding."""
    rng = np.random.default_rng(0)
    n = GLOBAL_BATCH * BATCHES
    source = rng.integers(1, VOCAB, (n, SOURCE_LEN)).astype("int32")
    target = rng.integers(3, VOCAB, (n, TARGET_LEN + 1)).astype("int32")
    source[:, -2:] = 0
    for row in range(n):
        if row % GLOBAL_BATCH < GLOBAL_BATCH // 2:  # first half of each batch: 2 real tokens
            target[row, 3:] = 0
    target_in, target_out = target[:, :-1], target[:, 1:]
    ds = tf.data.Dataset.from_tensor_slices(((source, target_in), target_out)).batch(GLOBAL_BATCH)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options), (source[:1], target_in[:1])


def make_model(kind):
    keras.utils.set_random_seed(7)
    if kind == "transformer":
        # Named: the weights' paths must not depend on the models a process made before (the test's own).
        return Transformer(VOCAB, VOCAB, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32,
                           dropout=0.0, max_length=16, name="transformer")
    return Seq2SeqRNN(VOCAB, VOCAB, attention="bahdanau", embedding_dim=8, units=16, dropout=0.0)


def make_optimizer(name):
    if name == "sgd":
        return optimizers.SGD(0.5)
    if name == "sgd_clipnorm":  # clipping active: the gradients' norms are well above 0.05
        return optimizers.SGD(0.5, clipnorm=0.05)
    return optimizers.Adam(1e-2, clipnorm=0.05)


def fit_once(strategy, kind, optimizer, initial_weights, ds, example):
    with strategy.scope():
        model = make_model(kind)
        model(example)
        model.set_weights(initial_weights)
        model.compile(make_optimizer(optimizer), loss=MaskedSparseCrossEntropy(label_smoothing=0.1),
                      metrics=[MaskedTokenAccuracy()], jit_compile=False)
    history = model.fit(ds, epochs=1, verbose=0, shuffle=False)
    return history.history, model.get_weights()


def compare_replicas(out):
    ds, example = make_data()
    one = tf.distribute.get_strategy()
    two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {}
    # Plain SGD shows the gradients' scale across replicas; clipped SGD, the gradients all-reduced, then clipped,
    # then shared out again (the RNN: its loop under the strategy). Adam's moments: the multi-worker test.
    for kind, optimizer in [("transformer", "sgd"), ("bahdanau", "sgd_clipnorm")]:
        model = make_model(kind)
        model(example)
        initial = model.get_weights()
        history_1, weights_1 = fit_once(one, kind, optimizer, initial, ds, example)
        history_2, weights_2 = fit_once(two, kind, optimizer, initial, ds, example)
        results[f"{kind}/{optimizer}"] = {
            "loss_1": history_1["loss"][0], "loss_2": history_2["loss"][0],
            "accuracy_1": history_1["token_accuracy"][0], "accuracy_2": history_2["token_accuracy"][0],
            "max_weight_diff": max(float(np.abs(a - b).max()) for a, b, w in zip(weights_1, weights_2, model.weights)
                                   if matches_one_device(w.path)),
            "max_update": max(float(np.abs(a - b).max()) for a, b in zip(weights_1, initial)),
            "replicas": two.num_replicas_in_sync,
        }
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


def train_worker(out, strategy_name):
    strategy = get_strategy(strategy_name)
    ds, example = make_data()
    with strategy.scope():
        model = make_model("transformer")
        model(example)
        model.compile(make_optimizer("adam_clipnorm"), loss=MaskedSparseCrossEntropy(),
                      jit_compile=False)
        if strategy.num_replicas_in_sync > 1:
            adapt_to_multi_worker(model, next(iter(ds)))
    history = model.fit(ds, epochs=2, verbose=0, shuffle=False)
    weights = {f"weights/{w.path}": w.numpy() for w in model.weights}
    compared = np.array([w.path for w in model.weights if matches_one_device(w.path)])
    np.savez(out, loss=np.array(history.history["loss"]), replicas=strategy.num_replicas_in_sync,
             steps=int(model.optimizer.iterations.numpy()), compared=compared, **weights)


def read_shards(out, prepared_folders):
    from keras_attention.data import PreparedCorpus

    from keras_attention.training.distribution import num_workers, worker_index

    strategy = get_strategy("multi_worker")
    workers = num_workers(strategy)
    reads = []
    for folder in prepared_folders:
        corpus = PreparedCorpus(folder)
        ds = corpus.dataset(batch_size=8, num_workers=workers, worker_index=worker_index(strategy), seed=1)
        rows, steps, sizes = [], 0, []
        for (source, _), _ in strategy.experimental_distribute_dataset(ds):
            steps += 1
            for local in strategy.experimental_local_results(source):
                sizes.append(int(local.shape[0]))
                rows.extend([int(i) for i in row if i != 0] for row in local.numpy())
        reads.append({"replicas": strategy.num_replicas_in_sync, "rows": rows, "steps": steps, "sizes": sizes,
                      "expected_steps": corpus.steps_per_epoch(batch_size=8, num_workers=workers)})
    with open(out, "w") as f:
        json.dump(reads, f)


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "replicas":
        compare_replicas(out)
    elif mode == "worker":
        train_worker(out, os.environ.get("STRATEGY", "multi_worker"))
    else:
        read_shards(out, sys.argv[3:])
