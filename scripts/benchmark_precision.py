"""Which precision and compiler train fastest here: one Transformer under each `train --precision` and `--jit`.

The same model (same initial weights, same random batch) is built once under
each variant, a Keras dtype policy with XLA on or off, and trained for
`--steps` steps a round; rounds alternate the variants A B C D A B C D ... so
that a slow moment of a shared machine hits all of them alike. Printed and
written: target tokens/s of every round, their medians, and each variant's
speed over the first one's (float32 with XLA, `train --jit`'s default for long
runs): the figure that says which `--precision` / `--jit` to give `train` on
this device. The device is printed: the script runs unchanged on a GPU, where
`mixed_float16` belongs in the list.

What decides it is the device's matrix units: a GPU's tensor cores, or on an
x86 CPU AMX (Intel Sapphire Rapids and later), which TensorFlow's own oneDNN
kernels use for bfloat16 products and XLA's CPU back end, in TensorFlow 2.21,
does not. So the script also times one bfloat16 and one float32 matrix
product with and without XLA, in the same run.

Models (`--model`): `tiny`, the `transformer-tiny` recipe of
`scripts/train_multi30k.py` (4+4 layers of width 128, feed-forward 256, a shared
10,000-piece vocabulary, dropout 0.3, 256 x 16 tokens a batch: its 4,096-token
batches); `small`, `benchmark_training.py`'s model (3+3 layers of width 256).
Both train with `train`'s CPU dropout switch (`use_cpu_dropout`), which acts
only under XLA on a CPU, as `train` does.

    python scripts/benchmark_precision.py --json benchmarks/precision.json
    python scripts/benchmark_precision.py --variants float32:xla mixed_float16:xla mixed_bfloat16:xla   # a GPU
    python scripts/benchmark_precision.py --quick    # a one-layer model, to test the script
"""

import argparse
import statistics

import keras
from benchmark_training import matmul_peak, random_batch, time_training
from timing import device, write_json

from keras_attention.models.cpu_kernels import use_cpu_dropout
from keras_attention.models import Transformer
from keras_attention.training import MaskedSparseCrossEntropy
from keras_attention.base.options import PRECISIONS

MODELS = {
    "tiny": dict(num_layers=4, d_model=128, num_heads=4, intermediate_dim=256, dropout=0.3, vocab=10000,
                 share_embeddings=True, batch=256, length=16),
    "small": dict(num_layers=3, d_model=256, num_heads=4, intermediate_dim=1024, dropout=0.1, vocab=8000,
                  share_embeddings=False, batch=64, length=24),
}
QUICK = dict(num_layers=1, d_model=32, num_heads=2, intermediate_dim=64, dropout=0.1, vocab=200,
             share_embeddings=True, batch=4, length=8)
DEFAULT_VARIANTS = ("float32:xla", "float32:no-xla", "mixed_bfloat16:no-xla", "mixed_bfloat16:xla")


def parse_variant(text):
    """`"POLICY:xla"` or `"POLICY:no-xla"` -> `(policy, jit_compile)`; argparse's error for anything else."""
    policy, _, compiler = text.partition(":")
    if policy not in PRECISIONS or compiler not in ("xla", "no-xla"):
        raise argparse.ArgumentTypeError(
            f"a variant is PRECISION:xla or PRECISION:no-xla with PRECISION one of {', '.join(PRECISIONS)}; "
            f"received {text!r}")
    return policy, compiler == "xla"


def build(c, policy):
    """The model of `c` under the dtype policy `policy` (variables float32, computation in its compute dtype)."""
    keras.config.set_dtype_policy(policy)
    try:
        return Transformer(
            c["vocab"], c["vocab"], num_layers=c["num_layers"], d_model=c["d_model"], num_heads=c["num_heads"],
            intermediate_dim=c["intermediate_dim"], dropout=c["dropout"], max_length=c["length"],
            share_embeddings=c["share_embeddings"],
        )
    finally:
        keras.config.set_dtype_policy("float32")


def build_variants(c, variants, batch):
    """{name: the model of `c` under that variant's policy, compiled with or without XLA}, for `variants`
    {name: (policy, jit_compile)}; every model starts from the first one's weights."""
    models = {}
    for name, (policy, jit) in variants.items():
        model = build(c, policy)
        model(batch[0])
        if models:
            model.set_weights(next(iter(models.values())).get_weights())
        use_cpu_dropout(model)
        model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCrossEntropy(), jit_compile=jit)
        models[name] = model
    return models


def product_rates(n=1024, repeats=5):
    """GFLOP/s of an n x n matrix product in float32 and bfloat16, with and without XLA (best of `repeats`)."""
    return {f"{dtype}:{'xla' if jit else 'no-xla'}": matmul_peak(n, repeats, dtype, jit_compile=jit)
            for dtype in ("float32", "bfloat16") for jit in (False, True)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny")
    parser.add_argument("--variants", nargs="+", type=parse_variant, metavar="PRECISION:xla|no-xla",
                        help=f"the first is the reference (default: {' '.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, help="sentences a batch (default: the model's)")
    parser.add_argument("--quick", action="store_true", help="a one-layer model, 2 steps, 1 round")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    variants = args.variants or [parse_variant(v) for v in DEFAULT_VARIANTS]
    names = [f"{policy}:{'xla' if jit else 'no-xla'}" for policy, jit in variants]
    if len(set(names)) != len(names):
        parser.error(f"each variant once; received {' '.join(names)}")
    c = dict(QUICK if args.quick else MODELS[args.model])
    if args.quick:
        args.steps, args.rounds = 2, 1
    c["batch"] = args.batch_size or c["batch"]
    print(f"device: {device()}; model {'quick' if args.quick else args.model}, "
          f"batch {c['batch']} x {c['length']} tokens")

    keras.utils.set_random_seed(0)
    batch = random_batch(c)
    models = build_variants(c, dict(zip(names, variants)), batch)
    runs = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name, model in models.items():  # A B C ...
            runs[name].append(time_training(model, batch, args.steps))
            print(f"round {round_ + 1} {name:22s}: {runs[name][-1]:9.1f} target tokens/s", flush=True)
    medians = {name: statistics.median(values) for name, values in runs.items()}
    reference = names[0]
    size = 256 if args.quick else 1024
    products = product_rates(size, repeats=2 if args.quick else 5)
    result = {
        "model": "quick" if args.quick else args.model, "config": c, "steps": args.steps, "rounds": args.rounds,
        "variants": names, "reference": reference, "tokens_per_second": runs, "median_tokens_per_second": medians,
        "speed_over_reference": {name: medians[name] / medians[reference] for name in names},
        "matmul_size": size, "matmul_gflops": products,
    }
    print(f"\nmedians over {args.rounds} rounds of {args.steps} steps, speed over {reference}:")
    for name in names:
        print(f"  {name:22s} {medians[name]:9.1f} target tokens/s  {result['speed_over_reference'][name]:5.2f}x")
    print(f"a {size} x {size} matrix product: " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in products.items()))
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
