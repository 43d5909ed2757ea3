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

Times are summed over the CPU threads XLA runs on. XLA's CPU runtime runs
independent operations at the same time, sharing the cores, and an operation
that shares them lasts longer than it would alone; so the script also prints
the time during which at least one operation ran and, for the costliest
operations, how much of their time another thread's operation ran too. A
category's share is therefore an upper bound of what removing it could save.

    python scripts/profile_training.py                    # our Transformer
    python scripts/profile_training.py --model keras-hub
    python scripts/profile_training.py --json profile.json

A profile is a tool for finding where to work, not a result the docs report, so
its JSON is not kept in `benchmarks/`.
"""

import argparse
import collections
import glob
import math
import os
import re
import shutil
import tempfile
import time

import keras
import tensorflow as tf
from benchmark_training import CONFIG, QUICK, keras_hub_model, ours, random_batch
from timing import read_trace, write_json

from keras_attention.training import MaskedSparseCrossEntropy

CATEGORIES = ("matrix products", "dropout bits", "optimizer", "loss", "layer norm", "softmax",
              "reductions", "copies", "elementwise")
# Profiler events that contain other events or only wait: not operations.
NOT_OPERATIONS = ("ThunkExecutor::Execute", "SlinkyThreadPool::Await")


def categorize(instruction, opcode, op_names):
    """The category of one optimised-HLO instruction from its name, opcode and TF op names."""
    names = " ".join(op_names).lower()
    if opcode in ("dot", "convolution") or instruction.startswith(("MatMul", "dot", "convolution")):
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


def training_step_module(dump_dir):
    """The text of the largest optimised training-step module XLA dumped in `dump_dir`."""
    modules = glob.glob(os.path.join(dump_dir, "*step_on*cpu_after_optimizations.txt"))
    if not modules:
        raise FileNotFoundError(
            f"XLA wrote no optimised training-step module to {dump_dir!r}. XLA reads its flags once per "
            "process, at its first compilation: run this script in a fresh Python process.")
    with open(max(modules, key=os.path.getsize), encoding="utf-8") as f:
        return f.read()


def dot_flops(text):
    """{instruction name: floating-point operations} of every `dot` in an optimised HLO module's text.

    A dot's FLOPs are 2 x (output elements) x (product of the left operand's
    contracting dimensions): one multiply and one add per term.
    """
    shapes = {name: [int(d) for d in dims.split(",") if d]
              for name, dims in re.findall(r"%([\w.\-]+) = \w+\[([\d,]*)\]", text)}
    flops = {}
    pattern = r"%([\w.\-]+) = \w+\[([\d,]*)\]\S* dot\(%([\w.\-]+),[^\n]*?lhs_contracting_dims=\{([\d,]*)\}"
    for name, dims, lhs, contracting in re.findall(pattern, text):
        terms = math.prod(shapes[lhs][int(i)] for i in contracting.split(",") if i)
        flops[name] = 2 * math.prod(int(d) for d in dims.split(",") if d) * terms
    return flops


def read_hlo_instructions(text):
    """{instruction name: (opcode, TF op names)} of an optimised HLO module's text.

    A fusion's TF op names are those of the instructions inside its fused
    computation, as XLA keeps metadata there. A fusion around a matrix
    product (XLA's CPU backend hands some, with their neighbours, to YNNPACK
    as `ynn_fusion`s, as it does some reductions) gets the opcode "dot".
    """
    computations = {}  # name -> op names of its instructions, and of the computations they call
    with_products = set()  # computations that hold a dot or a convolution
    for block in re.finditer(r"^%?([\w.\-]+) [^\n]*\{\n(.*?)\n\}", text, re.S | re.M):
        body = block.group(2)
        if re.search(r" (dot|convolution)\(", body):
            with_products.add(block.group(1))
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
        if opcode == "fusion" and any(callee in with_products for callee in re.findall(r"calls=%([\w.\-]+)", rest)):
            opcode = "dot"
        instructions[name] = (opcode, op_names)
    return instructions


def xla_events(trace_dir):
    """`(name, thread, start ps, end ps)` of every event on XLA's CPU worker threads, newest profile in `trace_dir`."""
    events = []
    for plane in read_trace(trace_dir).planes:
        for line in plane.lines:
            if "Eigen" not in line.name:  # XLA's CPU work runs on the Eigen pool's threads
                continue
            origin = line.timestamp_ns * 1000
            for event in line.events:
                start = origin + event.offset_ps
                name = plane.event_metadata[event.metadata_id].name
                events.append((name, (plane.id, line.id), start, start + event.duration_ps))
    return events


def concurrency(events):
    """How much the events overlap across threads.

    XLA's CPU runtime starts an operation as soon as its inputs are ready, so
    independent operations (the two gradient products of one layer, say) run
    at the same time and share the cores; each then lasts longer than it would
    alone, and summing durations counts the shared time twice.

    Args:
        events: `(name, thread, start, end)` tuples, with no event nested in
            another of its own thread.

    Returns:
        `({name: time during which an event of another thread also ran},
        time during which at least one event ran)`, in the events' unit.
    """
    boundaries = []
    for i, (_, _, start, end) in enumerate(events):
        if end > start:
            boundaries += [(start, 1, i), (end, -1, i)]
    boundaries.sort(key=lambda b: (b[0], b[1]))  # at equal times, ends before starts
    overlapped, busy, active, previous = collections.Counter(), 0, set(), None
    for moment, change, i in boundaries:
        if active and moment > previous:
            span = moment - previous
            busy += span
            if len({events[j][1] for j in active}) > 1:
                for j in active:
                    overlapped[events[j][0]] += span
        previous = moment
        if change > 0:
            active.add(i)
        else:
            active.discard(i)
    return overlapped, busy


def profile(model, batch, steps, dump_dir):
    """Profile `steps` training steps of `model`.

    Returns:
        A dict: `wall` (wall-clock ms per step), `categories` ({category: ms
        per step}), `operations` ({operation: ms per step}), `overlapped`
        ({operation: ms per step during which another thread's operation
        ran too}), `busy` (ms per step during which at least one operation
        ran), `unattributed` (ms per step of worker-thread events that match
        no instruction of the training step, which should be near zero),
        `flops` ({dot instruction: FLOPs per step}).
    """
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCrossEntropy(), jit_compile=True)
    data = tf.data.Dataset.from_tensors(batch).repeat()
    model.fit(data, steps_per_epoch=2, epochs=1, verbose=0, shuffle=False)  # compile (and dump) first
    trace_dir = tempfile.mkdtemp(prefix="profile-")
    tf.profiler.experimental.start(trace_dir)
    started = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    wall = (time.perf_counter() - started) / steps * 1e3
    tf.profiler.experimental.stop()
    module = training_step_module(dump_dir)
    instructions = read_hlo_instructions(module)
    by_category = dict.fromkeys(CATEGORIES, 0.0)
    by_operation = collections.Counter()
    unattributed = 0.0
    kept = []
    for name, thread, start, end in xla_events(trace_dir):
        ms = (end - start) / 1e9
        if name in NOT_OPERATIONS or name.startswith("end: ") or instructions.get(name, ("",))[0] == "call":
            continue  # a `call` only wraps instructions that have their own events
        if name not in instructions:
            unattributed += ms / steps
            continue
        opcode, op_names = instructions[name]
        by_category[categorize(name, opcode, op_names)] += ms / steps
        by_operation[name] += ms / steps
        kept.append((name, thread, start, end))
    overlapped, busy = concurrency(kept)
    shutil.rmtree(trace_dir, ignore_errors=True)
    return {"wall": wall, "categories": by_category, "operations": by_operation, "flops": dot_flops(module),
            "overlapped": {name: ps / 1e9 / steps for name, ps in overlapped.items()},
            "busy": busy / 1e9 / steps, "unattributed": unattributed}


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
        found = profile(model, random_batch(c), args.steps, dump_dir)
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)
    by_category, by_operation = found["categories"], found["operations"]
    total = sum(by_category.values())
    print(f"{args.model}: {found['wall']:.1f} ms a step (wall clock, {args.steps} profiled steps), "
          f"{total:.1f} ms of XLA operations a step (summed over threads; {found['unattributed']:.2f} ms of "
          f"other events on XLA's threads left out); at least one operation running during "
          f"{found['busy']:.1f} ms a step, {total / found['busy']:.2f} at a time on average\n")
    print(f"{'category':16s} {'ms/step':>9s} {'share':>7s}")
    for category, ms in sorted(by_category.items(), key=lambda item: -item[1]):
        print(f"{category:16s} {ms:9.2f} {ms / total:7.1%}")
    product_flops = sum(found["flops"].values())  # every dot of the step, each run once a step
    product_rate = product_flops / by_category["matrix products"] / 1e6
    print(f"\nmatrix products: {product_flops / 1e9:.1f} GFLOP a step (XLA's dot instructions) in "
          f"{by_category['matrix products']:.1f} ms summed over threads: {product_rate:.1f} GFLOP/s")
    print(f"\nthe {args.top} most costly operations (the part of their time another thread's ran too; "
          "for matrix products, GFLOP/s over the operation's time):")
    top = by_operation.most_common(args.top)
    rates = {name: found["flops"][name] / ms / 1e6 for name, ms in top if name in found["flops"]}
    for name, ms in top:
        rate = f"{rates[name]:7.1f} GFLOP/s" if name in rates else " " * 15
        print(f"  {ms:7.2f} ms  {found['overlapped'].get(name, 0.0) / ms:5.0%} overlapped  {rate}  {name}")
    result = {"model": args.model, "config": c, "steps": args.steps, "wall_ms_per_step": found["wall"],
              "operations_ms_per_step": total, "busy_ms_per_step": found["busy"],
              "unattributed_ms_per_step": found["unattributed"], "categories_ms_per_step": by_category,
              "shares": {k: v / total for k, v in by_category.items()},
              "top_operations_ms_per_step": dict(top),
              "top_operations_overlapped_ms_per_step": {name: found["overlapped"].get(name, 0.0) for name, _ in top},
              "top_operations_gflops": rates, "matrix_product_gflop_per_step": product_flops / 1e9,
              "matrix_product_gflops": product_rate}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
