"""When XLA pays for training: its compile time against the time it saves a step.

For each model preset, two copies of the library's Transformer (same weights)
are compiled the way `keras-attention train` compiles them (`training.recipe`'s
loss, optimizer and `cpu_dropout`), one with XLA and one without, in one
process. For each batch shape (batch 64, source and target `--lengths` tokens)
the first step of each is timed (XLA: trace and compile; without: trace, which
Keras does again for the first shapes only), then `--rounds` rounds of
`--steps` steps alternate between the two, and the medians are kept.

From these, for a run whose batches take `MAX_BUCKETS` shapes (the most length
buckets a run gets, `options.MAX_BUCKETS`):

    extra seconds = MAX_BUCKETS * (mean first XLA step) - (sum of first steps without XLA)
    seconds saved a step = mean over lengths of (step without XLA - step with XLA)
    break-even pairs = extra seconds / seconds saved a step * batch

Fewer buckets compile less but pad more (every batch to its bucket's
longest length), which costs XLA more than it saves on a short run
(`benchmark_training.py --only-compile-cost --length-buckets 1 4 8`). The
break-even is the number of pairs (epochs times pairs) a run must train on
before XLA is ahead; `options.XLA_MIN_PAIRS`, where `jit_compile="auto"`
starts compiling, is chosen at or above the largest break-even measured.
Runs unchanged on a GPU (the device is printed and stored).

    python scripts/benchmark_xla_break_even.py --json benchmarks/xla_break_even.json
    python scripts/benchmark_xla_break_even.py --quick   # a smoke test of the script
"""

import argparse
import statistics
import time

import keras
import numpy as np

from keras_attention.cpu_dropout import use_cpu_dropout
from keras_attention.models import build_model
from keras_attention.options import MAX_BUCKETS, XLA_MIN_PAIRS
from keras_attention.training.config import TrainConfig
from keras_attention.training.recipe import _compile
from timing import device, machine, write_json

VOCABULARY = {"tiny": 500, "small": 8000}  # the compile-cost command's and the train command's default sizes
BATCH = 64


def compiled_pair(preset, vocab):
    """`{"xla": model, "no_xla": model}`: one preset, the same weights, compiled as `train` compiles."""
    models = {}
    for name, xla in (("xla", True), ("no_xla", False)):
        keras.utils.set_random_seed(0)
        model = build_model("transformer", preset, vocab, vocab, max_length=64)
        model((np.ones((1, 8), "int32"), np.ones((1, 8), "int32")))
        use_cpu_dropout(model)  # as `train` does (`TrainConfig.cpu_dropout`); only acts inside XLA on a CPU
        _compile(model, TrainConfig(epochs=1), 1000, xla)
        models[name] = model
    return models


def timed_step(model, batch):
    started = time.perf_counter()
    model.train_on_batch(*batch)
    return time.perf_counter() - started


def measure(preset, lengths, steps, rounds):
    """One row per length: first step and median step, with and without XLA."""
    vocab = VOCABULARY[preset]
    models = compiled_pair(preset, vocab)
    rng = np.random.default_rng(0)
    rows = []
    for length in lengths:
        ids = rng.integers(1, vocab, (BATCH, length)).astype("int32")
        batch = ((ids, ids), ids)
        first = {name: timed_step(model, batch) for name, model in models.items()}
        times = {name: [] for name in models}
        for _ in range(rounds):  # A B A B: load on the machine hits both alike
            for name, model in models.items():
                times[name] += [timed_step(model, batch) for _ in range(steps)]
        row = {"length": length, "first_step_seconds": first,
               "median_step_seconds": {name: statistics.median(t) for name, t in times.items()}}
        rows.append(row)
        print(f"{preset} {length:3d} tokens: first step XLA {first['xla']:5.1f} s, without {first['no_xla']:5.1f} s; "
              f"a step XLA {row['median_step_seconds']['xla']:.3f} s, without "
              f"{row['median_step_seconds']['no_xla']:.3f} s", flush=True)
    return rows


def break_even(rows):
    """The break-even of one preset's rows (see the module docstring)."""
    mean_compile = statistics.mean(r["first_step_seconds"]["xla"] for r in rows)
    extra = MAX_BUCKETS * mean_compile - sum(r["first_step_seconds"]["no_xla"] for r in rows)
    saved = statistics.mean(r["median_step_seconds"]["no_xla"] - r["median_step_seconds"]["xla"] for r in rows)
    pairs = extra / saved * BATCH if saved > 0 else None  # None: XLA never catches up
    return {"extra_compile_seconds": extra, "seconds_saved_a_step": saved,
            "break_even_pairs": None if pairs is None else round(pairs)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(VOCABULARY), choices=list(VOCABULARY))
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 24, 32, 48, 64])
    parser.add_argument("--steps", type=int, default=4, help="steps a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny preset, two lengths, one round")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.presets, args.lengths, args.steps, args.rounds = ["tiny"], [8, 16], 2, 1
    print(f"device: {device()}; batch {BATCH}; {MAX_BUCKETS} batch shapes a run at most")
    result = {"machine": machine(), "device": device(), "batch": BATCH, "buckets": MAX_BUCKETS,
              "steps": args.steps, "rounds": args.rounds, "xla_min_pairs": XLA_MIN_PAIRS, "presets": {}}
    for preset in args.presets:
        rows = measure(preset, args.lengths, args.steps, args.rounds)
        result["presets"][preset] = {"vocabulary": VOCABULARY[preset], "rows": rows, **break_even(rows)}
        summary = result["presets"][preset]
        print(f"{preset}: XLA compiles {summary['extra_compile_seconds']:.0f} s more for {MAX_BUCKETS} shapes and "
              f"saves {summary['seconds_saved_a_step']:.3f} s a step: ahead after "
              f"{summary['break_even_pairs'] or 'never'} pairs", flush=True)
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
