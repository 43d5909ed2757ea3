"""When XLA pays for training: its compile time against the time it saves on real batches.

Both sides train on the same Multi30k pairs (en->de, the first `--pairs` of
the training split), batched as `keras-attention train` batches them:

- with XLA, in `MAX_BUCKETS` length buckets, each batch padded to its
  bucket's boundary and the ragged batches dropped (few shapes, compiled once);
- without XLA, in the same buckets, each batch padded to its longest pair.

For each model of `--models` (every kind, by default), two copies with the
same weights are compiled as `train` compiles them
(`recipe.compile_for_training`, `cpu_dropout`), one with XLA and one
without, in one process. A first pass over the batches
traces (and, with XLA, compiles each shape); then `--rounds` passes alternate
between the two, and the medians are kept. From these:

    compile seconds  = (first pass - median pass) with XLA, less the same without
    seconds a pair   = median pass / pairs in the pass (each side its own)
    break-even pairs = compile seconds / (seconds a pair without - seconds a pair with)

The break-even is the number of pairs (epochs times pairs) a run must train
on before XLA is ahead; "never" when XLA's passes are not faster. Unlike a
comparison at one batch shape, this charges XLA for its padding.
`base.options.XLA_MIN_PAIRS`, where `jit_compile="auto"` starts compiling, is set
at or above the largest. Runs unchanged on a GPU (the device is printed and stored).

    python scripts/benchmark_xla_break_even.py --json benchmarks/xla_break_even.json
    python scripts/benchmark_xla_break_even.py --quick   # a smoke test of the script
"""

import argparse
import os
import statistics
import time

import keras
import numpy as np

from keras_attention import data
from keras_attention.models.cpu_kernels import use_cpu_dropout
from keras_attention.models import build_model
from keras_attention.base.options import MAX_BUCKETS
from keras_attention.training.config import DataConfig, TrainConfig
from keras_attention.training.corpus import build_tokenizers
from keras_attention.training.recipe import compile_for_training
from timing import device, machine, write_json

# Model kind and preset, and the vocabulary size its commands use (the compile-cost command's, `train`'s default).
MODELS = {"transformer-tiny": ("transformer", "tiny", 500), "transformer-small": ("transformer", "small", 8000),
          "bahdanau-small": ("bahdanau", "small", 8000), "luong-small": ("luong", "small", 8000),
          "rnn-small": ("rnn", "small", 8000)}
BATCH = 64
SIDES = {"xla": True, "no_xla": False}


def real_batches(pairs, vocab, buckets):
    """`{"xla": [batch, ...], "no_xla": [...]}` of `pairs`, as `train` batches them with and without XLA."""
    config = DataConfig(dataset="multi30k", vocab_size=vocab)
    source_tok, target_tok = build_tokenizers(config, pairs, None)
    batches = {}
    for side, xla in SIDES.items():
        dataset = data.make_translation_dataset(
            pairs, source_tok, target_tok, BATCH, max_length=config.max_length,
            bucket_boundaries=buckets, pad_to_bucket_boundary=xla, drop_remainder=xla,
            shuffle=True, seed=0)
        batches[side] = [keras.tree.map_structure(np.asarray, batch) for batch in dataset]
    return batches, (source_tok.vocab_size, target_tok.vocab_size)


def compiled_pair(kind, preset, vocab_sizes):
    """`{"xla": model, "no_xla": model}`: one model, the same weights, compiled as `train` compiles."""
    models = {}
    for side, xla in SIDES.items():
        keras.utils.set_random_seed(0)
        model = build_model(kind, preset, *vocab_sizes, max_length=64)
        model((np.ones((1, 8), "int32"), np.ones((1, 8), "int32")))
        use_cpu_dropout(model)  # as `train` does (`ModelConfig.cpu_dropout`); only acts inside XLA on a CPU
        compile_for_training(model, TrainConfig.from_flat(model=kind, epochs=1), 1000, xla)
        models[side] = model
    return models


def timed_pass(model, batches):
    started = time.perf_counter()
    for inputs, labels in batches:
        model.train_on_batch(inputs, labels)
    return time.perf_counter() - started


def measure(name, pairs, buckets, rounds):
    """First pass and median pass of model `name`, with and without XLA, over the same pairs."""
    kind, preset, vocab = MODELS[name]
    batches, vocab_sizes = real_batches(pairs, vocab, buckets)
    models = compiled_pair(kind, preset, vocab_sizes)
    first = {side: timed_pass(models[side], batches[side]) for side in SIDES}
    passes = {side: [] for side in SIDES}
    for _ in range(rounds):  # A B A B: load on the machine hits both alike
        for side in SIDES:
            passes[side].append(timed_pass(models[side], batches[side]))
    return {
        "pairs": {side: sum(len(labels) for _, labels in batches[side]) for side in SIDES},
        "padded_tokens": {side: sum(labels.size for _, labels in batches[side]) for side in SIDES},
        "shapes": {side: len({(x[0].shape, x[1].shape) for x, _ in batches[side]}) for side in SIDES},
        "first_pass_seconds": first,
        "median_pass_seconds": {side: statistics.median(times) for side, times in passes.items()},
    }


def break_even(figures):
    """Compile seconds, seconds saved a pair and the break-even of one model's figures."""
    first, median, pairs = figures["first_pass_seconds"], figures["median_pass_seconds"], figures["pairs"]
    extra = (first["xla"] - median["xla"]) - (first["no_xla"] - median["no_xla"])
    saved = median["no_xla"] / pairs["no_xla"] - median["xla"] / pairs["xla"]
    return {"extra_compile_seconds": extra, "seconds_saved_a_pair": saved,
            "break_even_pairs": round(extra / saved) if saved > 0 else None}  # None: XLA never catches up


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--pairs", type=int, default=4096, help="Multi30k training pairs a pass")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny Transformer, 256 pairs, 2 buckets, one round")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    buckets = MAX_BUCKETS
    if args.quick:
        args.models, args.pairs, args.rounds, buckets = ["transformer-tiny"], 256, 1, 2
    pairs = data.load_multi30k("en", "de", "train", os.environ.get("KERAS_ATTENTION_DATA")).take(args.pairs).cache()
    print(f"device: {device()}; {args.pairs} Multi30k en-de pairs, batch {BATCH}, {buckets} length buckets")
    result = {"machine": machine(), "device": device(), "batch": BATCH, "buckets": buckets,
              "rounds": args.rounds, "models": {}}
    for name in args.models:
        figures = measure(name, pairs, buckets, args.rounds)
        summary = {"vocabulary": MODELS[name][2], **figures, **break_even(figures)}
        result["models"][name] = summary
        first, median = figures["first_pass_seconds"], figures["median_pass_seconds"]
        print(f"{name}: first pass XLA {first['xla']:.1f} s, without {first['no_xla']:.1f} s; a pass "
              f"XLA {median['xla']:.2f} s ({figures['pairs']['xla']} pairs, {figures['padded_tokens']['xla']} "
              f"target tokens), without {median['no_xla']:.2f} s ({figures['pairs']['no_xla']} pairs, "
              f"{figures['padded_tokens']['no_xla']} target tokens)", flush=True)
        ahead = f"ahead after {summary['break_even_pairs']:,} pairs" if summary["break_even_pairs"] else "never ahead"
        print(f"{name}: XLA compiles {summary['extra_compile_seconds']:.0f} s more for {figures['shapes']['xla']} "
              f"shapes and saves {summary['seconds_saved_a_pair'] * 1e3:.2f} ms a pair: {ahead}", flush=True)
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
