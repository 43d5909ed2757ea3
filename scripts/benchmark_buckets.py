"""Where the length buckets' boundaries go, end to end: a training epoch with each `bucket_method`.

Builds the `transformer-tiny` run of `scripts/train_multi30k.py` (Multi30k
en->de, batches of 4,096 tokens, XLA, 8 length buckets) twice, once with
`bucket_method="equal_count"` (the default) and once with `"min_padding"`,
and times whole training epochs of each: a first epoch (XLA compiles a
program for each batch shape; its excess over the median is the compile
cost), then `--rounds` epochs of each, alternated A B A B so that a slow
moment of a shared machine hits both. Each epoch is one pass of the bucketed
data (`steps_per_epoch` steps of the compiled training step `fit` runs, read
from one repeated iterator as `train` reads it).

Printed and written: for each method the boundaries, steps an epoch, the
real and the padded target tokens of one pass, the median epoch seconds,
real target tokens per second; and the ratio of the two (min-padding over
equal-count). The device is printed: the script runs unchanged on a GPU.

    python scripts/benchmark_buckets.py --json benchmarks/buckets.json
    python scripts/benchmark_buckets.py --quick     # a small model on 400 pairs, to test the script
"""

import argparse
import statistics
import tempfile
import time

import numpy as np
import tensorflow as tf

from timing import alternated_times, device, write_json
from train_multi30k import COMMON, CONFIGS  # this folder: run as a script

from keras_attention.base.options import BUCKET_METHODS
from keras_attention.training import recipe
from keras_attention.training.config import TrainConfig
from keras_attention.training.corpus import training_data

RECIPE = "transformer-tiny"
SOURCE, TARGET = "en", "de"
# --quick: a one-layer model on 400 pairs without XLA (batches padded to their longest pair), to test the script.
QUICK = dict(max_train_examples=400, vocab_size=300, length_buckets=4, jit_compile=False,
             overrides=dict(num_layers=1, intermediate_dim=64))


def build(method, output_dir, quick):
    """The recipe's model and data with `bucket_method=method`: (model, prepared data, one pass's counts)."""
    options = {**COMMON, **CONFIGS[RECIPE], **(QUICK if quick else {"length_buckets": 8}), "bucket_method": method}
    config = TrainConfig.from_flat(source=SOURCE, target=TARGET, output_dir=output_dir, **options)
    strategy = tf.distribute.get_strategy()
    prepared = training_data(config, strategy)
    model = recipe.build_and_compile(config, prepared, strategy)
    real = padded = 0
    widths = set()
    for (source, _), target_out in prepared.train.take(prepared.steps_per_epoch):
        real += int(np.count_nonzero(target_out))
        padded += int(np.size(target_out))
        widths.add(int(source.shape[1]))
    counts = {"steps_per_epoch": prepared.steps_per_epoch, "batch_widths": sorted(widths),
              "real_target_tokens": real, "padded_target_tokens": padded}
    return model, prepared, counts


def epoch_seconds(model, batches, steps):
    """Seconds of `steps` training steps, each Keras' compiled train function on the next batch of the
    `batches` iterator (what `fit` runs an epoch, without its callbacks)."""
    model.make_train_function()  # made once (compile_for_training has made it under XLA)
    train_step = model.train_function
    started = time.perf_counter()
    for _ in range(steps):
        logs = train_step(batches)
    float(logs["loss"])  # wait for the last step
    return time.perf_counter() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed epochs of each method (alternated)")
    parser.add_argument("--quick", action="store_true", help="a small model, 400 pairs, one round")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    print(f"Device: {device()}", flush=True)

    epochs, counts = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for method in BUCKET_METHODS:
            model, prepared, counts[method] = build(method, scratch, args.quick)
            batches = iter(prepared.train.repeat())  # one iterator for every epoch, as `train` reads it
            epochs[method] = (model, batches, prepared.steps_per_epoch)
        times = alternated_times(epochs, lambda epoch: epoch_seconds(*epoch), rounds)

    results = {}
    for method, (first, seconds) in times.items():
        median = statistics.median(seconds)
        one = counts[method]
        results[method] = {**one, "epoch_seconds": seconds, "median_epoch_seconds": median,
                           "first_epoch_seconds": first,
                           "real_target_tokens_per_second": one["real_target_tokens"] / median}
        print(f"{method:12s} widths {one['batch_widths']}, {one['steps_per_epoch']} steps an epoch, "
              f"real / padded target tokens {one['real_target_tokens'] / one['padded_target_tokens']:.2f}, "
              f"epoch {median:.1f} s (first {first:.1f} s), "
              f"{results[method]['real_target_tokens_per_second']:,.0f} real target tokens/s", flush=True)
    ratio = (results["min_padding"]["real_target_tokens_per_second"]
             / results["equal_count"]["real_target_tokens_per_second"])
    print(f"min_padding over equal_count, real target tokens/s: {ratio:.3f}x (median of {rounds} epochs each)")
    output = {"recipe": RECIPE, "data": f"Multi30k {SOURCE}->{TARGET}",
              "batch_tokens": CONFIGS[RECIPE]["batch_tokens"], "quick": args.quick, "rounds": rounds,
              "methods": results, "ratio_min_padding_over_equal_count": ratio}
    write_json(args.json, output)
    return output


if __name__ == "__main__":
    main()
