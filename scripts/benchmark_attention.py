"""Our MultiHeadAttention against keras.layers.MultiHeadAttention: time and memory.

Self-attention, batch 8, d_model 256, 4 heads, sequence lengths 64 to 1024,
forward and forward+backward, both compiled with XLA in `tf.function`, the
same weights (copied). Each length runs in its own process (both passes), where
the two layers' calls alternate (A B A B) so that a slow moment of a shared
machine hits both. Memory is what XLA's buffer assignment reserves for the compiled
function (parameters, outputs and temporaries: "Total bytes used" in the
`--xla_dump_to` report): exact and repeatable, unlike the resident size of a
process whose allocator keeps what compilation used. Time is the median of
`--repeats` calls after a warm-up call. Each row also says whether XLA
compiled the two layers' functions to the same program (the optimised HLO,
names aside): where it did, the two run the same instructions, and their
times differ only by the machine's noise.

    python scripts/benchmark_attention.py --json benchmarks/attention.json
    python scripts/benchmark_attention.py --batch 32 --lengths 512 1024 2048 4096   # a GPU
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from timing import device, write_json


def measure(length, batch, d_model, heads, repeats):
    """Runs in a child process: both layers, both passes, calls alternated; prints one JSON line,
    `{pass: {layer: {"seconds", "memory_mib"}, "same_program": bool}}`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    dump = tempfile.mkdtemp(prefix="xla_dump_")
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip()
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_attention.layers import MultiHeadAttention
    from timing import alternated_medians

    x = tf.constant(np.random.default_rng(0).normal(size=(batch, length, d_model)).astype("float32"))
    layers = {"ours": MultiHeadAttention(heads, d_model // heads),
              "keras": keras.layers.MultiHeadAttention(heads, d_model // heads)}
    for layer in layers.values():
        layer(x, x)
    layers["ours"].set_weights(layers["keras"].get_weights())  # same layout, same weights

    def compiled(name, layer, backward):
        def forward(x):
            return layer(x, x, use_causal_mask=True)

        def forward_backward(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x, x, use_causal_mask=True))
            return tape.gradient(loss, layer.trainable_variables)

        fn = forward_backward if backward else forward
        # Names the XLA module in the dump; neither name is the start of the other.
        fn.__name__ = f"{name}_{'forward_backward' if backward else 'forward_only'}"
        return tf.function(fn, jit_compile=True)

    results = {}
    for backward in (False, True):
        fns = {name: compiled(name, layer, backward) for name, layer in layers.items()}
        seconds = alternated_medians(fns, lambda fn: tf.nest.map_structure(lambda t: t.numpy(), fn(x)), repeats)
        names = {name: fn.python_function.__name__ for name, fn in fns.items()}
        result = {name: {"seconds": seconds[name], "memory_mib": xla_bytes_used(dump, names[name]) / 2**20}
                  for name in fns}
        result["same_program"] = canonical_hlo(optimized_hlo(dump, names["ours"])) == canonical_hlo(
            optimized_hlo(dump, names["keras"]))
        results[PASSES[backward]] = result
    shutil.rmtree(dump, ignore_errors=True)
    print(json.dumps(results))


def _dump_texts(dump, function_name, suffix, what):
    """The texts of the files in an XLA dump folder that belong to `function_name` and end with `suffix`."""
    texts = []
    for name in os.listdir(dump):
        if f"a_inference_{function_name}_" in name and name.endswith(suffix):
            with open(os.path.join(dump, name)) as f:
                texts.append(f.read())
    if not texts:
        raise RuntimeError(f"no {what} for {function_name!r} in {dump}")
    return texts


def xla_bytes_used(dump, function_name):
    """'Total bytes used' of the compiled module of `function_name` in an XLA dump folder."""
    texts = _dump_texts(dump, function_name, "buffer-assignment.txt", "XLA buffer assignment")
    found = [int(m) for text in texts for m in re.findall(r"Total bytes used: (\d+)", text)]
    if not found:
        raise RuntimeError(f"no 'Total bytes used' in the XLA buffer assignment of {function_name!r} in {dump}")
    return max(found)


def optimized_hlo(dump, function_name):
    """The HLO text XLA compiled for `function_name` (after its optimisations), from an XLA dump folder."""
    return max(_dump_texts(dump, function_name, "after_optimizations.txt", "optimised HLO"), key=len)


def canonical_hlo(text):
    """`text` (an HLO module) with its names numbered in order of appearance and its metadata and module
    line dropped: two modules that compute the same way give the same string, whatever their layers' names."""
    text = re.sub(r", metadata=\{[^}]*\}", "", text)
    names = {}
    return "\n".join(re.sub(r"%[\w.\-]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), line)
                     for line in text.splitlines() if not line.startswith("HloModule"))


PASSES = {False: "forward", True: "forward+backward"}


def run_child(length, args):
    command = [sys.executable, __file__, "--child", str(length),
               "--batch", str(args.batch), "--repeats", str(args.repeats)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="one short length, to test the script")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return measure(args.child, args.batch, 256, 4, args.repeats)
    if args.quick:
        args.lengths, args.batch, args.repeats = [16], 2, 2

    rows = []
    print(f"device: {device()}; batch {args.batch}, d_model 256, 4 heads, causal self-attention")
    print(f"{'pass':17s} {'length':>6s} {'ours ms':>9s} {'keras ms':>9s} {'speed ratio':>11s} "
          f"{'ours MiB':>9s} {'keras MiB':>9s} {'same program':>12s}")
    by_length = {length: run_child(length, args) for length in args.lengths}
    for backward in (False, True):
        for length in args.lengths:
            measured = by_length[length][PASSES[backward]]
            ours, theirs = measured["ours"], measured["keras"]
            row = {"pass": PASSES[backward], "length": length,
                   "ours": ours, "keras": theirs, "speed_ratio": theirs["seconds"] / ours["seconds"],
                   "same_program": measured["same_program"]}
            rows.append(row)
            print(f"{row['pass']:17s} {length:6d} {ours['seconds'] * 1e3:9.2f} {theirs['seconds'] * 1e3:9.2f} "
                  f"{row['speed_ratio']:11.2f} {ours['memory_mib']:9.1f} {theirs['memory_mib']:9.1f} "
                  f"{'yes' if row['same_program'] else 'no':>12s}")
    print("speed ratio = keras time / our time (> 1: ours is faster)")
    write_json(args.json, {"batch": args.batch, "d_model": 256, "heads": 4, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
