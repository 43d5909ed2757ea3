"""Dropout cost: our `layers.Dropout` against `keras.layers.Dropout`, under XLA.

A stack of `--layers` dropout layers (rate 0.1, the residual and embedding
dropouts of a 3 + 3 layer Transformer are 17) applied in turn to a
`(batch * length, d_model)` activation, forward and backward, in one
`tf.function(jit_compile=True)` per kind. Each layer has its own seed
generator, advanced at every call, so no call repeats the previous masks
(a constant seed would let XLA fold the random numbers away). Calls of the
two kinds alternate; time is the median of `--repeats` calls.

    python scripts/benchmark_dropout.py --json benchmarks/dropout.json
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

from keras_attention.layers import Dropout
from timing import alternated_medians, write_json


def stack(kind, count, rate):
    layers = [kind(rate, seed=i + 1) for i in range(count)]

    @tf.function(jit_compile=True)
    def forward_backward(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x
            for layer in layers:
                y = layer(y, training=True)
            total = tf.reduce_sum(y)
        return tape.gradient(total, x)

    return forward_backward


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=17)
    parser.add_argument("--rows", type=int, default=64 * 24, help="batch x length")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="small sizes, to test the script")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.rows, args.width, args.repeats = 2, 8, 16, 2
    x = tf.constant(np.random.default_rng(0).normal(size=(args.rows, args.width)).astype("float32"))
    fns = {"ours": stack(Dropout, args.layers, args.rate), "keras": stack(keras.layers.Dropout, args.layers, args.rate)}
    seconds = alternated_medians(fns, lambda fn: fn(x).numpy(), args.repeats)
    result = {"layers": args.layers, "shape": [args.rows, args.width], "rate": args.rate,
              "seconds": seconds, "speed_ratio": seconds["keras"] / seconds["ours"]}
    print(f"{args.layers} dropout layers on ({args.rows}, {args.width}), forward+backward, XLA: "
          f"ours {seconds['ours'] * 1e3:.2f} ms, keras {seconds['keras'] * 1e3:.2f} ms, "
          f"keras time / ours {result['speed_ratio']:.2f}")
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
