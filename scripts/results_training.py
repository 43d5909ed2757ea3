"""The result blocks on training speed: tokens a second against keras-hub, and what XLA's compiling costs."""

from keras_attention.base.options import DEFAULT_BUCKET_METHOD, PAIRS_PER_BUCKET, XLA_MIN_PAIRS
from results_common import load, provenance, table


def training():
    r = load("training")
    c = r["config"]
    med, frac = r["median_tokens_per_second"], r["fraction_of_peak"]
    lines = [
        "| model | target tokens/s (median) | model FLOPs utilisation |",
        "|---|---:|---:|",
        f"| ours (Keras' layers, no switch) | {med['ours']:,.0f} | {frac['ours']:.0%} |",
    ]
    if "ours_cpu_dropout" in med:
        lines.append(f"| ours with `cpu_dropout` | {med['ours_cpu_dropout']:,.0f} | {frac['ours_cpu_dropout']:.0%} |")
    if "ours_cpu_rows" in med:
        lines.append(f"| ours with `cpu_dropout` and `cpu_rows` (the recipe's default) | {med['ours_cpu_rows']:,.0f} "
                     f"| {frac['ours_cpu_rows']:.0%} |")
    lines += [
        f"| the same model from keras-hub layers | {med['keras_hub']:,.0f} | {frac['keras_hub']:.0%} |",
        "",
        f"Ours / keras-hub: **{r['ratio_ours_over_keras_hub']:.2f}x**"
        + (f"; with `cpu_dropout` **{r['ratio_ours_cpu_dropout_over_keras_hub']:.2f}x** (the switch gains "
           f"{r['cpu_dropout_gain']:+.1%} of a whole step)" if "cpu_dropout_gain" in r else "")
        + (f"; with both switches **{r['ratio_ours_cpu_rows_over_keras_hub']:.2f}x** (`cpu_rows` gains "
           f"{r['cpu_rows_gain']:+.1%} over `cpu_dropout` alone)" if "cpu_rows_gain" in r else "")
        + f". A training step of a Transformer with {c['num_layers']}+{c['num_layers']} layers, d_model "
        f"{c['d_model']}, batch {c['batch']} x {c['length']} tokens, XLA {'on' if r['xla'] else 'off'}, "
        f"on {r.get('device', 'a CPU')}; medians of {len(r['tokens_per_second']['ours'])} alternated rounds. "
        f"Utilisation is the model's FLOPs per second over the matrix-product peak "
        f"({r['matmul_peak_gflops']:.0f} GFLOP/s) measured in the same run.",
    ]
    if "compile_cost" in r:
        cost = r["compile_cost"]
        lines += ["", f"What compiling costs a short run (`{cost['command']}`"
                  + (f", measured with `{cost['measured_by']}`" if "measured_by" in cost else "")
                  + (f" on {cost['date']}, {cost['machine']}" if "machine" in cost else "") + "):", "",
                  "| XLA | whole command (s) | training (s) | to the first step (s) | steps beyond the median (s) "
                  "| batch shapes (training + validation) |", "|---|---:|---:|---:|---:|---:|"]
        for run in r["compile_cost"]["runs"]:
            shapes = run["batch_shapes"]
            xla = "on" if run["xla"] else "off"
            if run.get("jit") == "auto":
                xla = f"the default (auto): {xla}"
            if run.get("length_buckets"):
                xla += f", `--length-buckets {run['length_buckets']}`"
            if run.get("xla_cache"):
                xla += f", program cache {run['xla_cache']}"
            lines.append(f"| {xla} | {run['wall_seconds']:.0f} | {run['train_seconds']:.0f} "
                         f"| {run['seconds_to_first_step']:.0f} | {run['seconds_beyond_median']:.0f} "
                         f"| {shapes['train']} + {shapes['validation']} |")
        own = [run["batch_shapes"]["train"] for run in cost["runs"]
               if run["xla"] and run.get("jit") != "auto" and not run.get("length_buckets")]
        lines += ["", "Under XLA each training shape is one length bucket, compiled once: a run gets one bucket "
                  f"for every {PAIRS_PER_BUCKET:,} pairs it trains on"
                  + (f" (this one: {own[0]})" if own else "") + ", and the validation pass runs "
                  "without XLA. The program cache keeps the compiled programs for the next run." + bucket_cost(cost)
                  + default_xla(cost)]
    command = "python scripts/benchmark_training.py --json benchmarks/training.json"
    lines += ["", provenance(r, "training.json", command)]
    return "\n".join(lines) + "\n"


def default_xla(cost):
    """A sentence on what the command does by default (XLA "auto"), from its row, or ""."""
    auto = [run for run in cost["runs"] if run.get("jit") == "auto"]
    if not auto:
        return ""
    return (" By default (`jit_compile=\"auto\"`, the break-even below) this command "
            + ("compiled." if auto[0]["xla"] else "trained without XLA."))


def auto_rule():
    """What `train` does by default with XLA (`base.options.XLA_MIN_PAIRS`)."""
    return (f"`train`'s default, `jit_compile=\"auto\"`, compiles a run that trains on at least {XLA_MIN_PAIRS:,} "
            "pairs (`base.options.XLA_MIN_PAIRS`, at or above every break-even measured here); `--jit` forces XLA, "
            "`--no-jit` turns it off.")


def xla_break_even():
    r = load("xla_break_even")
    rows = []
    for name, p in r["models"].items():
        shapes, tokens, first, median = p["shapes"], p["padded_tokens"], p["first_pass_seconds"], \
            p["median_pass_seconds"]
        per_pair = {side: median[side] / p["pairs"][side] * 1e3 for side in median}
        ahead = f"{p['break_even_pairs']:,} pairs" if p["break_even_pairs"] else "never"
        rows.append((name, f"{shapes['xla']} / {shapes['no_xla']}", f"{tokens['xla']:,} / {tokens['no_xla']:,}",
                     f"{first['xla']:.0f} / {first['no_xla']:.0f}", f"{median['xla']:.1f} / {median['no_xla']:.1f}",
                     f"{per_pair['xla']:.2f} / {per_pair['no_xla']:.2f}", f"{p['extra_compile_seconds']:.0f}",
                     ahead))
    any_model = next(iter(r["models"].values()))
    return table(
        ["model", "batch shapes", "target tokens a pass, padded", "first pass (s)", "a pass (s, median)",
         "ms a pair", "compiling, XLA's extra (s)", "XLA ahead after"], rows,
        [f"XLA / without, on the same {any_model['pairs']['no_xla']:,} Multi30k en->de pairs, each side batched "
         f"as `train` batches it: {r['buckets']} length buckets of {r['batch']} pairs, padded to the bucket's "
         "boundary with XLA (the ragged batches dropped) and to the batch's longest pair without. Each "
         "model is compiled as `train` compiles it, both sides in one process; after a first pass "
         f"(tracing, and compiling with XLA) the passes of the two alternate ({r['rounds']} rounds; medians). "
         "XLA's extra compiling is its first pass beyond its median pass, less the same without; it is ahead "
         "once the milliseconds it saves a pair have repaid that, counting epochs times pairs. " + auto_rule(),
         provenance(r, "xla_break_even.json",
                    "python scripts/benchmark_xla_break_even.py --json benchmarks/xla_break_even.json")])


def bucket_cost(cost):
    """A sentence on what one more length bucket costs, from rows run with `--length-buckets`, or ""."""
    seconds = {(run["length_buckets"], run["xla_cache"] == "empty"): run["train_seconds"]
               for run in cost["runs"] if run.get("length_buckets")}
    counts = sorted({n for n, _ in seconds})
    if len(counts) < 2:
        return ""
    low, high = counts[0], counts[-1]

    def each(cold):
        return (seconds[high, cold] - seconds[low, cold]) / (high - low)

    empty, filled = each(True), each(False)
    if empty > 0 and filled > 0:
        verdict = "in a run this short the padding saved is worth less than the compiling."
    elif empty < 0 and filled < 0:
        verdict = "the padding saved is worth more than the compiling."
    else:
        verdict = "whether the padding saved is worth the compiling depends on the cache."
    return (f" Each bucket beyond the first changes the training time by {empty:+.0f} s with an empty cache "
            f"and {filled:+.0f} s with a filled one ({low} against {high} buckets, their shorter padding "
            "included): " + verdict)


def buckets():
    r = load("buckets")
    names = {"equal_count": "equal-count", "min_padding": "min-padding"}
    names[DEFAULT_BUCKET_METHOD] += " (the default)"
    rows = []
    for method, m in r["methods"].items():
        rows.append((f"{names.get(method, method)}: {', '.join(map(str, m['batch_widths']))}",
                     m["steps_per_epoch"], f"{m['real_target_tokens'] / m['padded_target_tokens']:.2f}",
                     f"{m['first_epoch_seconds']:.0f}", f"{m['median_epoch_seconds']:.1f}",
                     f"{m['real_target_tokens_per_second']:,.0f}"))
    return table(
        ["bucket method: batch widths", "steps an epoch", "real / padded target tokens", "first epoch (s)",
         "an epoch (s, median)", "real target tokens/s"], rows,
        [f"Min-padding over equal-count: **{r['ratio_min_padding_over_equal_count']:.2f}x** the real target "
         f"tokens a second. The `{r['recipe']}` recipe of `scripts/train_multi30k.py` ({r['data']}, batches of "
         f"{r['batch_tokens']:,} tokens, each padded to its bucket's boundary, XLA), built as `train` builds it "
         "once with each `--bucket-method`; after a first epoch (which compiles a program for each batch shape) "
         f"the two methods' epochs alternate ({r['rounds']} rounds; medians).",
         provenance(r, "buckets.json", "python scripts/benchmark_buckets.py --json benchmarks/buckets.json")])


def precision():
    r = load("precision")
    c = r["config"]
    names = {"float32": "float32", "mixed_float16": "`mixed_float16`", "mixed_bfloat16": "`mixed_bfloat16`"}

    def variant(name):
        policy, compiler = name.split(":")
        return f"{names[policy]}, {'XLA' if compiler == 'xla' else 'no XLA'}"

    med, speed = r["median_tokens_per_second"], r["speed_over_reference"]
    rows = [(variant(name), f"{med[name]:,.0f}", f"{speed[name]:.2f}x") for name in r["variants"]]
    products = []
    for key, rate in r["matmul_gflops"].items():  # "bfloat16:no-xla": GFLOP/s
        dtype, compiler = key.split(":")
        products.append(f"{dtype} {'with' if compiler == 'xla' else 'without'} XLA {rate:.0f}")
    return table(["`--precision`, `--jit`", "target tokens/s (median)", f"over {variant(r['reference'])}"], rows, [
        f"One training step of the `{r['model']}` model of `benchmark_precision.py` "
        f"({c['num_layers']}+{c['num_layers']} layers, width {c['d_model']}, feed-forward {c['intermediate_dim']}, "
        f"vocabulary {c['vocab']:,}, batch {c['batch']} x {c['length']} tokens), built once under each Keras "
        f"dtype policy from the same weights and compiled with or without XLA; {r['rounds']} alternated rounds "
        f"of {r['steps']} steps, medians. In the same run, a "
        f"{r['matmul_size']} x {r['matmul_size']} matrix product ran at (GFLOP/s): {', '.join(products)}.",
        provenance(r, "precision.json", "python scripts/benchmark_precision.py --json benchmarks/precision.json")])
