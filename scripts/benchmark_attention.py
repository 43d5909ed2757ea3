"""Our MultiHeadAttention against keras.layers.MultiHeadAttention: time and peak memory.

Self-attention, batch 8, d_model 256, 4 heads, sequence lengths 64 to 1024,
forward and forward+backward, both compiled with XLA in `tf.function`, the
same weights (copied). Each (layer, length, pass) is measured in its own
process so that the memory figures belong to it alone. After the compiling
call, the kernel's peak-resident-memory mark is reset (`/proc/self/clear_refs`)
and the memory figure is the peak during the timed calls minus the resident
memory just before them: what running the layer needs, not what XLA needed to
compile it. Time is the median of `--repeats` calls after a warm-up call.

    python scripts/benchmark_attention.py --json benchmarks/attention.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def measure(layer_name, length, backward, batch, d_model, heads, repeats):
    """Runs in a child process; prints one JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_attention.layers import MultiHeadAttention

    cls = MultiHeadAttention if layer_name == "ours" else keras.layers.MultiHeadAttention
    layer = cls(heads, d_model // heads)
    x = tf.constant(np.random.default_rng(0).normal(size=(batch, length, d_model)).astype("float32"))
    layer(x, x)

    @tf.function(jit_compile=True)
    def forward(x):
        return layer(x, x, use_causal_mask=True)

    @tf.function(jit_compile=True)
    def forward_backward(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x, x, use_causal_mask=True))
        return tape.gradient(loss, layer.trainable_variables)

    fn = forward_backward if backward else forward
    tf.nest.map_structure(lambda t: t.numpy(), fn(x))  # compile + warm up
    before = reset_peak_memory()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), fn(x))
        times.append(time.perf_counter() - start)
    peak = memory_kib("VmHWM")
    print(json.dumps({"seconds": statistics.median(times), "peak_mib": (peak - before) / 1024}))


def memory_kib(field):
    """`VmRSS` (resident now) or `VmHWM` (peak resident) of this process, in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def reset_peak_memory():
    """Reset the peak-RSS mark to the current RSS (Linux >= 4.0); returns the RSS in KiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return memory_kib("VmRSS")


def run_child(layer, length, backward, args):
    command = [sys.executable, __file__, "--child", layer, str(length), str(int(backward)),
               "--batch", str(args.batch), "--repeats", str(args.repeats)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="two short lengths, to test the script")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        layer, length, backward = args.child
        return measure(layer, int(length), bool(int(backward)), args.batch, 256, 4, args.repeats)
    if args.quick:
        args.lengths, args.batch, args.repeats = [16, 32], 2, 2

    rows = []
    print(f"{'pass':17s} {'length':>6s} {'ours ms':>9s} {'keras ms':>9s} {'speed ratio':>11s} "
          f"{'ours MiB':>9s} {'keras MiB':>9s}")
    for backward in (False, True):
        for length in args.lengths:
            ours = run_child("ours", length, backward, args)
            theirs = run_child("keras", length, backward, args)
            row = {"pass": "forward+backward" if backward else "forward", "length": length,
                   "ours": ours, "keras": theirs, "speed_ratio": theirs["seconds"] / ours["seconds"]}
            rows.append(row)
            print(f"{row['pass']:17s} {length:6d} {ours['seconds'] * 1e3:9.2f} {theirs['seconds'] * 1e3:9.2f} "
                  f"{row['speed_ratio']:11.2f} {ours['peak_mib']:9.1f} {theirs['peak_mib']:9.1f}")
    print("speed ratio = keras time / our time (> 1: ours is faster)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch": args.batch, "d_model": 256, "heads": 4, "rows": rows}, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
