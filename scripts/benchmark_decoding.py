"""Decoding speed: cached greedy against re-running the prefix, and beam 4 against greedy.

A Transformer (d_model 256, 3+3 layers, 4 heads, d_ff 1024, vocabulary 8,000,
random weights), batches of 16 and of 1 sentence (`--batches`), 24 source tokens. The end token's output bias is
pushed to -1e9 so that every run emits exactly `n` tokens. Each decoder runs
inside one `tf.function` (XLA on with `--xla`), timed as the median of
`--repeats` calls after a compiling call; the three decoders' calls
alternate, so that a slow moment of a shared machine hits all three:

- cached greedy: `greedy_decode(model, ...)`, one decoder step per token with
  the key/value caches;
- uncached greedy: the same loop over `UncachedDecoder(model)`, which re-runs
  the whole teacher-forced model on the prefix at every step, as the
  TensorFlow Transformer tutorial does;
- beam 4: `beam_search(model, ..., beam_size=4)`;
- greedy on 4 x B rows: cached greedy on the batch repeated 4 times, the
  work of any beam search that carries its 4 hypotheses as rows of one
  batch (the floor for beam 4, printed as beam4/floor).
Sentences/s of the exported SavedModel are measured by benchmark_serving.py.

    python scripts/benchmark_decoding.py --json benchmarks/decoding.json
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

from keras_attention.decoding import UncachedDecoder, beam_search, greedy_decode
from keras_attention.models import Transformer
from timing import alternated_medians, write_json

START, END = 2, 3


def build(c):
    model = Transformer(c["vocab"], c["vocab"], num_layers=c["layers"], d_model=c["d_model"], num_heads=4,
                        intermediate_dim=c["d_ff"], dropout=0.0, tie_output=False, max_length=128)
    model((source_batch(c, 2), source_batch(c, 2)[:, :4]))
    bias = model.output_projection.bias
    bias.assign(tf.tensor_scatter_nd_update(bias, [[END]], [-1e9]))  # never stop early
    return model


def source_batch(c, batch):
    return np.random.default_rng(0).integers(4, c["vocab"], size=(batch, 24)).astype("int32")


def timed(fns, source, repeats):
    """Median seconds of each decoder in `fns` (a dict), calls alternated."""
    return alternated_medians(
        fns, lambda fn: tf.nest.map_structure(lambda t: t.numpy() if t is not None else None, fn(source)), repeats
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 1])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--xla", action="store_true", help="compile the decoders with XLA")
    parser.add_argument("--quick", action="store_true", help="a tiny model, to test the script")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    c = dict(vocab=8000, layers=3, d_model=256, d_ff=1024)
    if args.quick:
        c = dict(vocab=100, layers=1, d_model=16, d_ff=32)
        args.lengths, args.repeats, args.batches = [4, 8], 2, [2]
    keras.utils.set_random_seed(0)
    model = build(c)
    uncached = UncachedDecoder(model)
    rows = []
    print(f"{'batch':>5s} {'tokens':>6s} {'cached ms':>10s} {'uncached ms':>12s} {'speed-up':>9s} {'beam4 ms':>9s} "
          f"{'beam4/greedy':>13s} {'4xB rows ms':>12s} {'beam4/floor':>12s}")
    for batch in args.batches:
        source = source_batch(c, batch)
        for n in args.lengths:
            compile_ = lambda f: tf.function(f, jit_compile=args.xla)  # noqa: E731
            greedy = compile_(lambda s: greedy_decode(model, s, START, END, n).tokens)
            medians = timed({
                "cached": greedy,
                "uncached": compile_(lambda s: greedy_decode(uncached, s, START, END, n).tokens),
                "beam": compile_(lambda s: beam_search(model, s, START, END, n, beam_size=4).tokens),
                "floor": lambda s: greedy(np.repeat(s, 4, axis=0)),  # another trace of `greedy`
            }, source, args.repeats)
            cached, slow, beam, floor = (medians[k] for k in ("cached", "uncached", "beam", "floor"))
            row = {"batch": batch, "tokens": n, "cached_s": cached, "uncached_s": slow, "speedup": slow / cached,
                   "beam4_s": beam, "beam4_over_greedy": beam / cached, "greedy_4x_rows_s": floor,
                   "beam4_over_floor": beam / floor}
            rows.append(row)
            print(f"{batch:5d} {n:6d} {cached * 1e3:10.1f} {slow * 1e3:12.1f} {row['speedup']:9.2f} "
                  f"{beam * 1e3:9.1f} {row['beam4_over_greedy']:13.2f} {floor * 1e3:12.1f} "
                  f"{row['beam4_over_floor']:12.2f}")
    result = {"config": c, "xla": args.xla, "rows": rows}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
