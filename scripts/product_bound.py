"""The matrix products of a Transformer training step, each timed alone at its shape.

`scripts/benchmark_training.py --product-bound` calls `report`: every matrix
product of one training step of the benchmark's model (XLA, the 15 distinct
products of `step_products`) is timed alone; their sum is the time of a step
that did nothing but its products, each as fast as it runs alone, and the
fraction of the peak that implies. It is a picture of each product's rate
alone, not a bound on the step: inside a step XLA overlaps products and runs
some faster than alone, and on the project's virtual machine the same
products timed alone have run at rates half again apart in different runs
(benchmarks/RESULTS.md records a run where a whole step beat this sum).
"""

import collections
import math

import tensorflow as tf

from timing import alternated_medians  # this folder: run as a script


def step_products(c):
    """The matrix products of one training step: {(equation, shape_a, shape_b): count}.

    Dense layers `(M, K) x (K, N)` give three products each: forward
    `mk,kn->mn`, input gradient `mn,kn->mk` and kernel gradient `mk,mn->kn`.
    Each attention block gives six batched products over G = batch x heads:
    Q K^T and its value-side twin dP = dO V^T (`gqh,gkh->gqk`), P V and
    dQ = dS K (`gqk,gkh->gqh`), dV = P^T dO and dK = dS^T Q (`gqk,gqh->gkh`).
    """
    b, s, t, d, ff, v = c["batch"], c["length"], c["length"], c["d_model"], c["intermediate_dim"], c["vocab"]
    layers, heads = c["num_layers"], c["num_heads"]
    dense = collections.Counter()
    for m, k, n, count in [
        (b * s, d, d, 4 * layers + 2 * layers),  # encoder Q K V O, cross-attention K V
        (b * t, d, d, 4 * layers + 2 * layers),  # decoder Q K V O, cross-attention Q O
        (b * s, d, ff, layers), (b * s, ff, d, layers),  # encoder FFN
        (b * t, d, ff, layers), (b * t, ff, d, layers),  # decoder FFN
        (b * t, d, v, 1),  # output layer
    ]:
        dense[("mk,kn->mn", (m, k), (k, n))] += count
        dense[("mn,kn->mk", (m, n), (k, n))] += count
        dense[("mk,mn->kn", (m, k), (m, n))] += count
    g, h = b * heads, d // heads
    for q, k in [(s, s), (t, t), (t, s)]:  # encoder self, decoder self, cross-attention
        dense[("gqh,gkh->gqk", (g, q, h), (g, k, h))] += 2 * layers
        dense[("gqk,gkh->gqh", (g, q, k), (g, k, h))] += 2 * layers
        dense[("gqk,gqh->gkh", (g, q, k), (g, q, h))] += 2 * layers
    return dense


def product_flops(equation, shape_a, shape_b):
    """2 x the product of every axis length of an einsum product (batch, kept and contracted)."""
    inputs = equation.split("->")[0]
    sizes = dict(zip(inputs.replace(",", ""), tuple(shape_a) + tuple(shape_b)))
    return 2 * math.prod(sizes.values())


def product_bound(c, repeats=10, copies=4):
    """The step's products, each measured alone at its shape with XLA.

    Every distinct product is compiled `copies` times over different inputs
    in one function (so that a call's fixed cost is shared) and timed
    `repeats` times; the median per product, times the number of such
    products in a step, summed. Returns `(seconds, flop, rows)` for one step,
    `rows` giving each distinct product's count, ms and GFLOP/s.
    """
    total_seconds = total_flop = 0.0
    rows = []
    for (equation, shape_a, shape_b), count in step_products(c).items():
        operands = [(tf.random.normal(shape_a), tf.random.normal(shape_b)) for _ in range(copies)]
        run = tf.function(lambda pairs, e=equation: [tf.einsum(e, a, b) for a, b in pairs], jit_compile=True)
        seconds = alternated_medians({equation: run}, lambda fn: fn(operands)[-1].numpy(), repeats)[equation] / copies
        flop = product_flops(equation, shape_a, shape_b)
        rows.append({"equation": equation, "shapes": [list(shape_a), list(shape_b)], "count": count,
                     "ms": seconds * 1e3, "gflops": flop / seconds / 1e9})
        total_seconds += count * seconds
        total_flop += count * flop
    return total_seconds, total_flop, rows


def report(c, peak, ours_seconds_per_step, repeats=10):
    """`product_bound(c)` printed, and as the benchmark JSON's `product_bound` entry.

    `peak`: the matrix-product peak (GFLOP/s) of the same run; `ours_seconds_per_step`: the
    measured step, printed beside the sum.
    """
    seconds, flop, rows = product_bound(c, repeats=repeats)
    gflops = flop / seconds / 1e9
    for row in rows:
        print(f"  {row['count']:3d} x {row['equation']:13s} {str(row['shapes']):28s} "
              f"{row['ms']:7.3f} ms  {row['gflops']:6.1f} GFLOP/s")
    print(f"the step's matrix products alone, each timed at its shape: {flop / 1e9:.1f} GFLOP in "
          f"{seconds * 1e3:.1f} ms = {gflops:.1f} GFLOP/s, so a step made of nothing else "
          f"would reach {gflops / peak:.0%} of the peak (ours: {ours_seconds_per_step * 1e3:.1f} ms a step)")
    return {"gflop_per_step": flop / 1e9, "seconds_per_step": seconds, "gflops": gflops,
            "max_fraction_of_peak": gflops / peak, "ours_seconds_per_step": ours_seconds_per_step, "products": rows}
