"""Training speed: our Transformer against the same model built from keras-hub layers.

Both models: d_model 256, 3 encoder + 3 decoder layers, 4 heads, d_ff 1024,
vocabulary 8,000, learned positions, untied output layer, dropout 0.1 on the
embeddings, on every residual branch and on the attention weights (keras-hub's
blocks apply their one `dropout` to all three), batch 64 x 24 source and
target tokens, the same random data, Adam, our masked loss. Runs alternate
A B A B (at least three each) so that load on the machine hits both alike; each
run times `--steps` training steps after two warm-up steps (in the first
round, these compile the step; each model is compiled once for all rounds).

Ours runs three times over: as the layers package builds it, with the `cpu_dropout`
switch of `keras_attention.models.cpu_kernels`, and with `cpu_dropout` and `cpu_rows` (the
training recipe's default), all from the same weights: the in-process A/B of each switch.

Printed: target tokens/s of each run and their medians, the ratios to keras-hub,
model FLOPs per target token, the achieved GFLOP/s, the float32 matrix-product
peak measured in the same process, and the fraction of it reached; then each
round's own ratio and fraction (of the peak measured just before that round).

FLOPs per target token (training = forward + backward = 3x forward):
    6 * N_dense * (S / T) [encoder]  +  6 * N_dec [decoder and output layer]
  + 12 * L * d * (S * S / T  +  T  +  S)   [QK^T and AV products: encoder
    self-attention over S, decoder self-attention over T, cross-attention over S]
where N_dense counts the weights used in matrix products (embedding lookups
excluded), S and T are the source and target lengths. With S = T this is the
usual 6N plus the attention terms.

    python scripts/benchmark_training.py --json benchmarks/training.json
    python scripts/benchmark_training.py --no-xla
    python scripts/benchmark_training.py --batch-size 256 --precision mixed_float16   # a GPU
    python scripts/benchmark_training.py --product-bound   # and the products alone (product_bound.py)
    python scripts/benchmark_training.py --compile-cost   # one-epoch tiny runs, XLA on and off
    python scripts/benchmark_training.py --only-compile-cost --json benchmarks/training.json   # just those

`--product-bound` adds the time of the step's matrix products, each alone at its shape
(`product_bound.py`).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from keras_attention.models.cpu_kernels import use_cpu_dropout, use_cpu_rows
from keras_attention.models import Transformer
from keras_attention.base.files import RunPaths
from keras_attention.base.options import argument_type
from keras_attention.training import MaskedSparseCrossEntropy

import product_bound  # this folder: run as a script
from timing import commit, device, machine, write_json

CONFIG = dict(num_layers=3, d_model=256, num_heads=4, intermediate_dim=1024, vocab=8000, batch=64, length=24)
QUICK = dict(CONFIG, num_layers=1, d_model=32, num_heads=2, intermediate_dim=64, vocab=200, batch=4, length=8)


def ours(c):
    return Transformer(
        c["vocab"], c["vocab"], num_layers=c["num_layers"], d_model=c["d_model"], num_heads=c["num_heads"],
        intermediate_dim=c["intermediate_dim"], dropout=0.1, attention_dropout=0.1, max_length=c["length"],
        position="learned", tie_output=False,
    )


def keras_hub_model(c):
    """The same architecture from keras-hub's public layers, as a functional model."""
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    # The padding masks go to the blocks as arguments rather than riding on the
    # embeddings (mask_zero): that way no sublayer that ignores masks (keras-hub's
    # PositionEmbedding, EinsumDense) is handed one, and Keras has nothing to warn about.
    embed = lambda: keras_hub.layers.TokenAndPositionEmbedding(c["vocab"], c["length"], c["d_model"])  # noqa: E731
    source_mask, target_mask = keras.ops.not_equal(source, 0), keras.ops.not_equal(target, 0)
    x = keras.layers.Dropout(0.1)(embed()(source))
    for _ in range(c["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(c["intermediate_dim"], c["num_heads"], dropout=0.1)(
            x, padding_mask=source_mask)
    y = keras.layers.Dropout(0.1)(embed()(target))
    for _ in range(c["num_layers"]):
        y = keras_hub.layers.TransformerDecoder(c["intermediate_dim"], c["num_heads"], dropout=0.1)(
            y, x, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask)
    logits = keras.layers.Dense(c["vocab"], dtype="float32")(y)
    return keras.Model((source, target), logits)


def dense_parameters(model, c):
    """Weights used in matrix products: all but the embedding tables."""
    embeddings = 2 * (c["vocab"] + c["length"]) * c["d_model"]
    return model.count_params() - embeddings


def flops_per_target_token(model, c):
    s = t = c["length"]
    n = dense_parameters(model, c)
    layers, d = c["num_layers"], c["d_model"]
    # The encoder's weights run over the S source tokens, the rest over the T
    # target tokens: per encoder block, attention 4(d^2 + d), FFN, two norms.
    per_encoder = 4 * (d * d + d) + 2 * d * c["intermediate_dim"] + c["intermediate_dim"] + d + 4 * d
    n_encoder = layers * per_encoder
    n_decoder = n - n_encoder
    attention = 12 * layers * d * (s * s / t + t + s)
    return 6 * n_encoder * (s / t) + 6 * n_decoder + attention


def random_batch(c, seed=0):
    rng = np.random.default_rng(seed)
    ids = lambda: rng.integers(1, c["vocab"], size=(c["batch"], c["length"])).astype("int32")  # noqa: E731
    return (ids(), ids()), ids()


def matmul_peak(n=2048, repeats=10, dtype="float32", jit_compile=None):
    """GFLOP/s of an n x n matrix product in `dtype` on the default device (best of `repeats`), compiled
    with XLA if `jit_compile`."""
    a = tf.cast(tf.random.normal((n, n)), dtype)
    b = tf.cast(tf.random.normal((n, n)), dtype)
    product = tf.function(lambda: tf.matmul(a, b), jit_compile=jit_compile, autograph=False)
    product().numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product().numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


COMPILE_COST_COMMAND = ["train", "--preset", "tiny", "--epochs", "1", "--max-train-examples", "2000",
                        "--vocab-size", "500"]


def compile_cost(length_buckets=None):
    """The cost of compiling: `keras-attention train` (`COMPILE_COST_COMMAND`, Multi30k
    from KERAS_ATTENTION_DATA), each run in its own process: with XLA (`--jit`) and
    an empty `--xla-cache` folder, with XLA again on the same folder (the programs
    the run before compiled are loaded), without XLA (`--no-jit`), and as the
    command comes (XLA "auto": on only for a run long enough to repay it).

    `length_buckets`: None for the train command's own number of length buckets,
    or a list of numbers, each run with XLA (empty and filled cache) with
    `--length-buckets N`; the runs without XLA and by default come once, last.

    Returns one row per run: `jit` ("on", "off" or "auto") and `xla` (whether
    the run compiled), wall-clock seconds of the whole command, training
    seconds, seconds to the first step, seconds of steps beyond the median
    (compilation), and the distinct batch shapes of training and validation.
    """
    rows = []
    # Per number of buckets, a pair of runs on one cache folder: the second loads what the first compiled.
    runs = [("on", state, n) for n in (length_buckets or [None]) for state in ("empty", "filled by the run before")]
    runs += [("off", None, None), ("auto", None, None)]
    flags = {"on": ["--jit"], "off": ["--no-jit"], "auto": []}
    with tempfile.TemporaryDirectory(prefix="compile_cost_") as folder:
        for jit, cache_state, buckets in runs:
            output = os.path.join(folder, f"run{len(rows)}")
            command = [sys.executable, "-m", "keras_attention.cli", *COMPILE_COST_COMMAND, "--output", output]
            command += flags[jit]
            command += ["--xla-cache", os.path.join(folder, f"xla-cache-{jit}-{buckets}")] if jit != "off" else []
            command += ["--length-buckets", str(buckets)] if buckets else []
            env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
            started = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - started
            with open(RunPaths(output).results, encoding="utf-8") as f:
                results = json.load(f)
            xla = results["start_up"]["xla"]
            rows.append({"jit": jit, "xla": xla, "xla_cache": cache_state if xla else None,
                         "wall_seconds": round(wall, 1), "train_seconds": results["train_seconds"],
                         **({"length_buckets": buckets} if buckets else {}),
                         **{k: v for k, v in results["start_up"].items() if k != "xla"}})
            print(f"compile cost, jit {jit}, cache {cache_state}: {rows[-1]}", flush=True)
    return rows


class StepTimes(keras.callbacks.Callback):
    """The wall-clock time at the end of every training batch."""

    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())


def time_training(model, batch, steps):
    """Steady-state target tokens/s of `model.fit` (compiled) on one repeated batch.

    The clock runs from the end of the first batch of a `fit` call to the end
    of its last, so it covers `steps` whole steps and none of what `fit` does
    once per call (building the iterator, and now and then several seconds
    of set-up seen on this machine that would otherwise swamp a short run).
    """
    (x, y), z = batch
    data = tf.data.Dataset.from_tensors(((x, y), z)).repeat()
    model.fit(data, steps_per_epoch=2, epochs=1, verbose=0, shuffle=False)  # compile (first round), warm up
    timer = StepTimes()
    model.fit(data, steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[timer], shuffle=False)
    elapsed = timer.times[-1] - timer.times[0]
    return steps * batch[1].size / elapsed  # target tokens per second


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-xla", action="store_true", help="compile without XLA for both")
    parser.add_argument("--quick", action="store_true", help="a tiny configuration, to test the script")
    parser.add_argument("--product-bound", action="store_true",
                        help="also time the step's matrix products alone, each at its shape: "
                             "the fraction of the peak a step made of nothing else would reach")
    parser.add_argument("--batch-size", type=int, help=f"sentences a batch (default {CONFIG['batch']})")
    parser.add_argument("--length", type=int, help=f"source and target tokens a sentence (default {CONFIG['length']})")
    parser.add_argument("--precision", default="float32", choices=("float32", "mixed_float16", "mixed_bfloat16"),
                        help="Keras dtype policy of both models; the peak is measured in its compute dtype")
    parser.add_argument("--compile-cost", action="store_true",
                        help="also time `keras-attention " + " ".join(COMPILE_COST_COMMAND) + "` with and "
                             "without XLA (needs KERAS_ATTENTION_DATA)")
    parser.add_argument("--only-compile-cost", action="store_true",
                        help="measure the compile cost alone and store it in the existing --json file")
    parser.add_argument("--length-buckets", type=argument_type("length_buckets"), nargs="+", metavar="N",
                        help="compile cost: run the XLA command with each of these numbers of length buckets "
                             "(default: the command's own choice)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.only_compile_cost:
        with open(args.json, encoding="utf-8") as f:
            result = json.load(f)
        result["compile_cost"] = {"command": "keras-attention " + " ".join(COMPILE_COST_COMMAND),
                                  "runs": compile_cost(args.length_buckets),
                                  "measured_by": "python " + " ".join(sys.argv),
                                  "commit": commit(), "date": time.strftime("%Y-%m-%d"), "machine": machine()}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
        return result
    c = dict(QUICK if args.quick else CONFIG)
    if args.quick:
        args.steps, args.rounds = 2, 1
    c["batch"] = args.batch_size or c["batch"]
    c["length"] = args.length or c["length"]
    keras.config.set_dtype_policy(args.precision)
    compute_dtype = keras.config.dtype_policy().compute_dtype
    print(f"device: {device()}; precision {args.precision}; batch {c['batch']} x {c['length']} tokens")
    keras.utils.set_random_seed(0)
    batch = random_batch(c)
    # "ours" is the library's Transformer as the layers package builds it; the same
    # model (same initial weights) with the CPU switches of keras_attention.models.cpu_kernels:
    # "ours_cpu_dropout" with `cpu_dropout`, "ours_cpu_rows" with `cpu_dropout` and
    # `cpu_rows` (the training recipe's default). Alternating with each other and with
    # keras-hub, they are the in-process A/B of each switch.
    models = {"ours": ours(c), "ours_cpu_dropout": ours(c), "ours_cpu_rows": ours(c), "keras_hub": keras_hub_model(c)}
    for model in models.values():
        model(batch[0])
    for name in ("ours_cpu_dropout", "ours_cpu_rows"):
        models[name].set_weights(models["ours"].get_weights())
        use_cpu_dropout(models[name])
    use_cpu_rows(models["ours_cpu_rows"])
    params = {name: model.count_params() for name, model in models.items()}
    print(f"parameters: ours {params['ours']:,}, keras-hub {params['keras_hub']:,} "
          f"(difference {abs(params['ours'] / params['keras_hub'] - 1):.2%})")
    # The peak is measured before every round too, and the best is kept: on
    # a shared machine a single measurement can catch a slow moment.
    peaks = []
    runs = {name: [] for name in models}
    jit = not args.no_xla
    # Once for all rounds: compiling each round would trace and compile the
    # step again and keep the old executables (hundreds of MB a round here).
    for model in models.values():
        model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCrossEntropy(), jit_compile=jit)
        model.optimizer.build(model.trainable_variables)  # keras-hub's too: made in the trace, they double it
    for round_ in range(args.rounds):
        peaks.append(matmul_peak(256 if args.quick else 2048, dtype=compute_dtype))
        print(f"round {round_ + 1} {compute_dtype} matrix product: {peaks[-1]:.1f} GFLOP/s")
        for name, model in models.items():  # A B A B ...
            runs[name].append(time_training(model, batch, args.steps))
            print(f"round {round_ + 1} {name:9s}: {runs[name][-1]:8.1f} target tokens/s")
    peak = max(peaks)
    medians = {name: statistics.median(values) for name, values in runs.items()}
    flops = {name: flops_per_target_token(models[name], c) for name in models}
    result = {
        "config": c, "xla": jit, "precision": args.precision, "parameters": params, "matmul_peak_gflops": peak,
        "matmul_peaks": peaks,
        "tokens_per_second": runs, "median_tokens_per_second": medians,
        "ratio_ours_over_keras_hub": medians["ours"] / medians["keras_hub"],
        "ratio_ours_cpu_dropout_over_keras_hub": medians["ours_cpu_dropout"] / medians["keras_hub"],
        "cpu_dropout_gain": medians["ours_cpu_dropout"] / medians["ours"] - 1,
        "ratio_ours_cpu_rows_over_keras_hub": medians["ours_cpu_rows"] / medians["keras_hub"],
        "cpu_rows_gain": medians["ours_cpu_rows"] / medians["ours_cpu_dropout"] - 1,
        "flops_per_target_token": flops,
        "achieved_gflops": {n: medians[n] * flops[n] / 1e9 for n in models},
    }
    # Model FLOPs utilisation: the model's own FLOPs (not recomputation or
    # padding) per second, over the device's measured matrix-product peak.
    result["fraction_of_peak"] = {n: result["achieved_gflops"][n] / peak for n in models}
    # Each round's two runs follow each other within a minute, and the peak is
    # measured just before them: per-round figures show how much a slow
    # stretch of a shared machine moved the medians above.
    result["rounds"] = [
        {"ratio": ours_tps / hub_tps, "fraction_of_peak": ours_tps * flops["ours"] / 1e9 / round_peak}
        for ours_tps, hub_tps, round_peak in zip(runs["ours"], runs["keras_hub"], peaks)
    ]
    print(f"\nXLA {'on' if jit else 'off'}; medians over {args.rounds} rounds of {args.steps} steps; "
          f"matrix-product peak {peak:.1f} GFLOP/s (best of the rounds)")
    for name in models:
        print(f"{name:9s}: {medians[name]:8.1f} tokens/s, {flops[name] / 1e6:.1f} MFLOP/token, "
              f"{result['achieved_gflops'][name]:.1f} GFLOP/s = {result['fraction_of_peak'][name]:.0%} of peak")
    print(f"ratio ours / keras-hub: {result['ratio_ours_over_keras_hub']:.2f}; with cpu_dropout: "
          f"{result['ratio_ours_cpu_dropout_over_keras_hub']:.2f} (cpu_dropout gains "
          f"{result['cpu_dropout_gain']:+.1%} of the whole step); with cpu_dropout and cpu_rows: "
          f"{result['ratio_ours_cpu_rows_over_keras_hub']:.2f} (cpu_rows gains {result['cpu_rows_gain']:+.1%})")
    print("per round (ours / keras-hub, ours' fraction of that round's peak): " + ", ".join(
        f"{r['ratio']:.2f} {r['fraction_of_peak']:.0%}" for r in result["rounds"]))
    if args.product_bound:
        tokens = c["batch"] * c["length"]
        result["product_bound"] = product_bound.report(c, peak, tokens / medians["ours"],
                                                       repeats=2 if args.quick else 10)
    keras.config.set_dtype_policy("float32")
    if args.compile_cost:
        result["compile_cost"] = {"command": "keras-attention " + " ".join(COMPILE_COST_COMMAND),
                                  "runs": compile_cost(args.length_buckets)}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
