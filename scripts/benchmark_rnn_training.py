"""RNN training speed: the attention projections as `ops.matmul` (the layers' form) against `ops.einsum`.

`AlignmentAttention._project` multiplies the decoder state by the score's
kernel at every step of the RNN scan. Written as `ops.einsum("...d,du->...u")`
it made the whole training step of the `small` Seq2SeqRNN several times
slower under XLA on a CPU than `ops.matmul` (which the layers use again).
This script measures that: for each model (Bahdanau, Luong), two copies
with the same weights, one tracing its step with each form, trained on the
same random batches (`--batch-size` x `--length` tokens, vocabulary 8,000),
alternating A B A B for `--rounds` rounds of `--steps` steps after a warm-up
(compile) step each. Printed: the device, each round's target tokens/s and
the median ratio matmul / einsum.

    python scripts/benchmark_rnn_training.py --json benchmarks/rnn_training.json
    python scripts/benchmark_rnn_training.py --quick
"""

import argparse
import statistics
import sys
import time

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_attention.base.files import write_json
from keras_attention.layers.alignment_attention import AlignmentAttention
from keras_attention.models import build_model
from keras_attention.training.losses import MaskedSparseCrossEntropy


def einsum_project(self, x, kernel):
    dtype = self.compute_dtype
    return ops.einsum("...d,du->...u", ops.cast(x, dtype), ops.cast(kernel, dtype))


def compiled(kind, preset, jit, batch):
    keras.utils.set_random_seed(0)
    model = build_model(kind, preset, 8000, 8000)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=MaskedSparseCrossEntropy(), jit_compile=jit)
    model.train_on_batch(*batch)  # builds and traces the step with the `_project` in place now
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bahdanau", "luong"])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-xla", action="store_true")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to test the script")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.batch_size, args.length, args.steps, args.rounds = "tiny", 8, 6, 2, 2
    device = tf.config.list_logical_devices()[-1].name
    print(f"device: {device}; {args.preset} preset, batch {args.batch_size} x {args.length} tokens, "
          f"XLA {'off' if args.no_xla else 'on'}", flush=True)
    rng = np.random.default_rng(0)
    batch = ((rng.integers(1, 8000, (args.batch_size, args.length)).astype("int32"),
              rng.integers(1, 8000, (args.batch_size, args.length)).astype("int32")),
             rng.integers(1, 8000, (args.batch_size, args.length)).astype("int32"))
    tokens = args.batch_size * args.length * args.steps
    results = {}
    for kind in args.models:
        models = {"matmul": compiled(kind, args.preset, not args.no_xla, batch)}
        plain = AlignmentAttention._project
        AlignmentAttention._project = einsum_project
        try:
            models["einsum"] = compiled(kind, args.preset, not args.no_xla, batch)
        finally:
            AlignmentAttention._project = plain
        rates = {name: [] for name in models}
        for round_ in range(args.rounds):
            for name, model in models.items():
                started = time.perf_counter()
                for _ in range(args.steps):
                    model.train_on_batch(*batch)
                rates[name].append(tokens / (time.perf_counter() - started))
            print(f"{kind} round {round_ + 1}: " + ", ".join(f"{n} {r[-1]:,.0f}" for n, r in rates.items())
                  + " target tokens/s", flush=True)
        ratio = statistics.median(a / b for a, b in zip(rates["matmul"], rates["einsum"]))
        results[kind] = {"tokens_per_second": {n: [round(r) for r in v] for n, v in rates.items()},
                         "median_ratio_matmul_over_einsum": round(ratio, 3)}
        print(f"{kind}: matmul / einsum = {ratio:.2f} (median of the rounds' ratios)", flush=True)
    if args.json:
        command = "python scripts/benchmark_rnn_training.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_json(args.json, {"command": command.strip(), "device": device, "preset": args.preset,
                               "batch_size": args.batch_size, "length": args.length, "steps": args.steps,
                               "rounds": args.rounds, "xla": not args.no_xla, "results": results}, indent=1)


if __name__ == "__main__":
    main()
