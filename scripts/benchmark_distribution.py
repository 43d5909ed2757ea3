"""Training speed with 1 and 2 replicas (MirroredStrategy over 2 logical CPU devices).

The process splits its CPU into two logical devices before TensorFlow starts,
then trains the same small Transformer on the same random batches:

    1 replica,  global batch B     (per-replica batch B)
    2 replicas, global batch B     (per-replica batch B/2: same work per step)
    2 replicas, global batch 2B    (per-replica batch B: twice the work per step)

Runs alternate between the cases (`--repeats` rounds) so that load from other
programs on the machine hits them alike; each run times `--steps` steps after a
warm-up run that traces the step. Printed per case: steps/s and target
tokens/s (medians), with the per-replica and the global batch.

Logical devices share the same cores: on a machine without GPUs this measures
the cost of the replication (splitting, all-reduce, merging), not a speed-up.
XLA is off in every case (Keras cannot compile a multi-replica step with XLA).

    python scripts/benchmark_distribution.py --json benchmarks/distribution.json
    python scripts/benchmark_distribution.py --quick
"""

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attention.models import Transformer  # noqa: E402
from keras_attention.training import MaskedSparseCrossEntropy, optimizers  # noqa: E402
from timing import write_json  # noqa: E402

CONFIG = dict(num_layers=2, d_model=128, num_heads=4, intermediate_dim=512, vocab=2000, batch=32, length=24)
QUICK = dict(num_layers=1, d_model=32, num_heads=2, intermediate_dim=64, vocab=200, batch=8, length=8)


def _split_cpu():
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def _dataset(c, global_batch):
    rng = np.random.default_rng(0)
    n = global_batch * 8
    source = rng.integers(1, c["vocab"], (n, c["length"])).astype("int32")
    target = rng.integers(1, c["vocab"], (n, c["length"] + 1)).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices(((source, target[:, :-1]), target[:, 1:]))
    return ds.batch(global_batch, drop_remainder=True).cache().repeat().prefetch(2)


def _model(c, strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = Transformer(c["vocab"], c["vocab"], num_layers=c["num_layers"], d_model=c["d_model"],
                            num_heads=c["num_heads"], intermediate_dim=c["intermediate_dim"], dropout=0.1,
                            max_length=c["length"] + 1)
        model.compile(optimizers.Adam(1e-4, clipnorm=1.0), loss=MaskedSparseCrossEntropy(0.1),
                      jit_compile=False)
    return model


class StepTimer(keras.callbacks.Callback):
    """Records the end time of every training step."""

    def on_train_begin(self, logs=None):
        self.times = []

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())

    def steps_per_second(self):
        return (len(self.times) - 1) / (self.times[-1] - self.times[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the cases")
    parser.add_argument("--quick", action="store_true", help="a tiny model and a few steps (for tests)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    c = QUICK if args.quick else CONFIG
    steps, repeats = (4, 1) if args.quick else (args.steps, args.repeats)

    _split_cpu()
    one = tf.distribute.get_strategy()
    two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    cases = [("1 replica", one, c["batch"]), ("2 replicas", two, c["batch"]),
             ("2 replicas", two, 2 * c["batch"])]
    models = [_model(c, strategy) for _, strategy, _ in cases]
    data = [_dataset(c, batch) for _, _, batch in cases]
    for model, ds in zip(models, data):  # warm-up: trace and run the step
        model.fit(ds, steps_per_epoch=2, epochs=1, verbose=0, shuffle=False)

    speeds = [[] for _ in cases]
    for _ in range(repeats):
        for i, (model, ds) in enumerate(zip(models, data)):
            timer = StepTimer()
            model.fit(ds, steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[timer], shuffle=False)
            speeds[i].append(timer.steps_per_second())

    rows = []
    for (name, strategy, batch), runs in zip(cases, speeds):
        replicas = strategy.num_replicas_in_sync
        median = statistics.median(runs)
        rows.append({"case": name, "replicas": replicas, "global_batch": batch,
                     "per_replica_batch": batch // replicas, "steps_per_second": round(median, 2),
                     "target_tokens_per_second": round(median * batch * c["length"]),
                     "runs_steps_per_second": [round(r, 2) for r in runs]})
    result = {"config": c, "timed_steps": steps, "repeats": repeats, "rows": rows,
              "environment": {"cpu_count": os.cpu_count(), "gpus": len(tf.config.list_physical_devices("GPU")),
                              "logical_cpu_devices": len(tf.config.list_logical_devices("CPU")),
                              "load_average": [round(x, 2) for x in os.getloadavg()],
                              "platform": platform.platform(), "tensorflow": tf.__version__}}
    _print(result)
    write_json(args.json, result)
    return result


def _print(result):
    c, m = result["config"], result["environment"]
    print(f"Transformer {c['num_layers']}+{c['num_layers']} layers, d_model {c['d_model']}, vocabulary "
          f"{c['vocab']}, {c['length']} target tokens per sentence; XLA off; {result['timed_steps']} "
          f"timed steps x {result['repeats']} runs per case (median).")
    print(f"Machine: {m['cpu_count']} CPU cores, {m['gpus']} GPUs, {m['logical_cpu_devices']} logical CPU "
          f"devices; load average {m['load_average']}.")
    print(f"{'case':<11} {'global batch':>12} {'per replica':>11} {'steps/s':>8} {'tokens/s':>9}")
    for r in result["rows"]:
        print(f"{r['case']:<11} {r['global_batch']:>12} {r['per_replica_batch']:>11} "
              f"{r['steps_per_second']:>8.2f} {r['target_tokens_per_second']:>9}")


if __name__ == "__main__":
    main(sys.argv[1:])
