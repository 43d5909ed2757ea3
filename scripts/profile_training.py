"""Where a training step's time goes: XLA's operations grouped by what they do.

Trains the model of `benchmark_training.py` (ours, or the keras-hub one, same
configuration and data) for a few steps with XLA under the TensorFlow
profiler, then attributes the time of every operation XLA ran on the CPU to
the TensorFlow ops it was compiled from (read from the optimised HLO that XLA
dumps in the same run), and prints the time per step of each category:

    matrix products   dot / convolution instructions (the FLOPs the benchmark counts)
    dropout bits      random-number generation for dropout masks
    optimizer         the weight update (ops under the optimizer's name scope)
    loss              the cross-entropy and its gradient over the vocabulary
    layer norm        normalisation layers and their gradients
    softmax           attention softmax and its gradient (outside the products)
    reductions        other reductions (bias gradients, sums)
    copies            copies and transposes (layout changes)
    elementwise       everything else (bias adds, activations, residual sums...)

Times are summed over the CPU threads XLA runs on, so their total is CPU time
per step; the share of each category is what its removal could save.

    python scripts/profile_training.py                    # our Transformer
    python scripts/profile_training.py --model keras-hub
    python scripts/profile_training.py --json benchmarks/profile.json
"""

import argparse
import collections
import glob
import os
import re
import shutil
import tempfile
import time

import keras
import tensorflow as tf
from benchmark_training import CONFIG, QUICK, keras_hub_model, ours, random_batch
from tensorflow.tsl.profiler.protobuf import xplane_pb2
from timing import write_json

from keras_attention.training import MaskedSparseCrossEntropy

CATEGORIES = ("matrix products", "dropout bits", "optimizer", "loss", "layer norm", "softmax",
              "reductions", "copies", "elementwise")
# Profiler events that contain other events or only wait: not operations.
NOT_OPERATIONS = ("ThunkExecutor::Execute", "SlinkyThreadPool::Await")


def categorize(instruction, opcode, op_names):
    """The category of one optimised-HLO instruction from its name, opcode and TF op names."""
    names = " ".join(op_names).lower()
    if opcode in ("dot", "convolution") or instruction.startswith(("MatMul", "dot", "convolution", "ynn_fusion")):
        return "matrix products"
    if "stateless_random" in names or "rng" in instruction:
        return "dropout bits"
    if re.search(r"(^|[ /])(adam|sgd|adamw|rmsprop|adafactor|lamb)[^ /]*/", names):
        return "optimizer"
    if "compile_loss" in names:
        return "loss"
    if "norm" in names:
        return "layer norm"
    if "softmax" in names or re.search(r"attention[^ ]*/(exp|max|sub|truediv|sum)", names):
        return "softmax"
    if "reduce" in opcode or "reduce" in instruction:
        return "reductions"
    if opcode in ("copy", "transpose") or instruction.startswith(("copy", "transpose")):
        return "copies"
    return "elementwise"


def read_hlo_instructions(dump_dir):
    """{instruction name: (opcode, TF op names)} of the largest compiled training step in `dump_dir`.

    A fusion's TF op names are those of the instructions inside its fused
    computation, as XLA keeps metadata there.
    """
    modules = glob.glob(os.path.join(dump_dir, "*step_on*cpu_after_optimizations.txt"))
    if not modules:
        raise FileNotFoundError(
            f"XLA wrote no optimised training-step module to {dump_dir!r}. XLA reads its flags once per "
            "process, at its first compilation: run this script in a fresh Python process.")
    with open(max(modules, key=os.path.getsize), encoding="utf-8") as f:
        text = f.read()
    computations = {}  # name -> op names of its instructions, and of the computations they call
    for block in re.finditer(r"^%?([\w.\-]+) [^\n]*\{\n(.*?)\n\}", text, re.S | re.M):
        body = block.group(2)
        computations[block.group(1)] = (re.findall(r'op_name="([^"]+)"', body)
                                        + re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", body))
    instructions = {}
    pattern = r"^\s*(?:ROOT )?%([\w.\-]+) = \S+ ([a-z\-]+)\((.*)$"
    for match in re.finditer(pattern, text, re.M):
        name, opcode, rest = match.groups()
        op_names = re.findall(r'op_name="([^"]+)"', rest)
        for callee in re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", rest):
            # A reduction's computation is named after its TF op ("..._norm_1_moments_variance-reduction").
            op_names += computations.get(callee, []) + [callee]
        instructions[name] = (opcode, op_names)
    return instructions


def operation_times(trace_dir):
    """{event name: total ms} over the XLA CPU worker threads of the newest profile in `trace_dir`."""
    paths = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "*.xplane.pb")))
    if not paths:
        raise FileNotFoundError(f"The profiler wrote no trace to {trace_dir!r}")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if "Eigen" not in line.name:  # XLA's CPU work runs on the Eigen pool's threads
                continue
            for event in line.events:
                times[plane.event_metadata[event.metadata_id].name] += event.duration_ps / 1e9
    return times


def profile(model, batch, steps, dump_dir):
    """Profile `steps` training steps of `model`.

    Returns:
        (wall-clock ms per step, {category: ms per step}, {operation: ms per
        step}, ms per step of worker-thread events that match no instruction
        of the training step, which should be near zero).
    """
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCrossEntropy(), jit_compile=True)
    data = tf.data.Dataset.from_tensors(batch).repeat()
    model.fit(data, steps_per_epoch=2, epochs=1, verbose=0)  # compile (and dump) first
    trace_dir = tempfile.mkdtemp(prefix="profile-")
    tf.profiler.experimental.start(trace_dir)
    started = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    wall = (time.perf_counter() - started) / steps * 1e3
    tf.profiler.experimental.stop()
    instructions = read_hlo_instructions(dump_dir)
    by_category = dict.fromkeys(CATEGORIES, 0.0)
    by_operation = collections.Counter()
    unattributed = 0.0
    for name, ms in operation_times(trace_dir).items():
        if name in NOT_OPERATIONS or name.startswith("end: ") or instructions.get(name, ("",))[0] == "call":
            continue  # a `call` only wraps instructions that have their own events
        if name not in instructions:
            unattributed += ms / steps
            continue
        opcode, op_names = instructions[name]
        by_category[categorize(name, opcode, op_names)] += ms / steps
        by_operation[name] += ms / steps
    shutil.rmtree(trace_dir, ignore_errors=True)
    return wall, by_category, by_operation, unattributed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("ours", "keras-hub"), default="ours")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=10, help="also print the N most costly operations")
    parser.add_argument("--quick", action="store_true", help="a tiny configuration, to test the script")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    c = dict(QUICK if args.quick else CONFIG)
    if args.quick:
        args.steps = 2
    # XLA reads its flags at its first compilation in the process: set the dump folder before any.
    dump_dir = tempfile.mkdtemp(prefix="xla-dump-")
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump_dir} --xla_dump_hlo_as_text"
    keras.utils.set_random_seed(0)
    model = ours(c) if args.model == "ours" else keras_hub_model(c)
    try:
        wall, by_category, by_operation, unattributed = profile(model, random_batch(c), args.steps, dump_dir)
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)
    total = sum(by_category.values())
    print(f"{args.model}: {wall:.1f} ms a step (wall clock, {args.steps} profiled steps), "
          f"{total:.1f} ms of XLA operations a step (summed over threads; {unattributed:.2f} ms of "
          f"other events on XLA's threads left out)\n")
    print(f"{'category':16s} {'ms/step':>9s} {'share':>7s}")
    for category, ms in sorted(by_category.items(), key=lambda item: -item[1]):
        print(f"{category:16s} {ms:9.2f} {ms / total:7.1%}")
    print(f"\nthe {args.top} most costly operations:")
    for name, ms in by_operation.most_common(args.top):
        print(f"  {ms:7.2f} ms  {name}")
    result = {"model": args.model, "config": c, "steps": args.steps, "wall_ms_per_step": wall,
              "operations_ms_per_step": total,
              "unattributed_ms_per_step": unattributed, "categories_ms_per_step": by_category,
              "shares": {k: v / total for k, v in by_category.items()},
              "top_operations_ms_per_step": dict(by_operation.most_common(args.top))}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
