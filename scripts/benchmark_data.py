"""Data pipeline at corpus scale: raw text and prepared records against the training step.

Generates a synthetic parallel corpus (plain text, one sentence a line) at
each size of `--sizes`, with a realistic length distribution: source lengths
log-normal with a median of 20 words (1 to 150), target lengths about the
source's (a log-normal ratio of spread 0.15), words drawn from a Zipf-like
distribution over 30,000 generated word forms per side. One WordPiece
vocabulary per side (8,000 tokens, from the 0.5M corpus' first 100,000
lines) is used at every size, and each corpus is prepared once into records
with `write_prepared_corpus` (its time is reported too).

Then, each in a fresh process (so that every peak RSS is its own; `--quick`:
all in this process):
- raw: `load_parallel_files` (line-count check, cleaning) and
  `make_translation_dataset` streaming with in-graph tokenization, length
  buckets and `--batch-tokens` batches, as `train` runs a large corpus;
- prepared: `PreparedCorpus.dataset` with the same batching, as
  `train --data-dir PREPARED` runs;
- the training step of the `small` Transformer (3+3 layers, d_model 256,
  compiled with XLA as `train` does by default; `--quick`: the `tiny` one,
  without XLA) on batches of the prepared pipeline.

Measured: the time from building the pipeline to its first batch (the
line-count check and the length sample included), then `--rounds` rounds of
`--batches` batches each; the pipeline's throughput is the median round's
real (not padding) target tokens per second. Peak RSS is the process'
maximum resident set (`VmHWM`), TensorFlow included. Training throughput
is real target tokens per second over `--train-steps` steps, median of the
rounds. The ratios pipeline / training say how many such training steps one
pipeline keeps busy on this machine's cores.

    python scripts/benchmark_data.py --json benchmarks/data_pipeline.json
    python scripts/benchmark_data.py --quick
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from timing import machine, peak_rss_mb

WORDS_PER_SIDE = 30_000  # word forms of 1-4 syllables: at most 20 + 20**2 + 20**3 + 20**4 of them
SOURCE_SYLLABLES = "ta ne ri so mal ken dor pi lu ve ba co the wa in st ex pro re ly".split()
TARGET_SYLLABLES = "ein sch ber ung kla tor mi fe ga du zu ver ge lich keit au ob nen ra hof".split()
BATCH_TOKENS = 4096


def log(message):
    print(message, flush=True)


# --- the synthetic corpus ----------------------------------------------------

def word_forms(rng, count, syllables):
    """`count` distinct made-up words, from 1-4 syllables each (`count` must be below the number possible)."""
    forms = set()
    while len(forms) < count:
        n = rng.integers(1, 5)
        forms.add("".join(rng.choice(syllables, n)))
    return np.array(sorted(forms), dtype=object)


def generate_corpus(folder, pairs, seed=0, chunk=100_000):
    """Write `pairs` lines to `folder/corpus.en` and `.de`; return the two paths (kept if present)."""
    paths = [os.path.join(folder, f"corpus.{side}") for side in ("en", "de")]
    if all(os.path.exists(p) for p in paths):
        return paths
    rng = np.random.default_rng(seed)
    source_words = word_forms(rng, WORDS_PER_SIDE, SOURCE_SYLLABLES)
    target_words = word_forms(rng, WORDS_PER_SIDE, TARGET_SYLLABLES)
    ranks = np.arange(1, WORDS_PER_SIDE + 1)
    zipf = 1.0 / ranks ** 1.07
    zipf /= zipf.sum()
    with open(paths[0] + ".part", "w", encoding="utf-8") as fs, open(paths[1] + ".part", "w", encoding="utf-8") as ft:
        for start in range(0, pairs, chunk):
            n = min(chunk, pairs - start)
            source_len = np.clip(np.rint(rng.lognormal(np.log(20), 0.5, n)), 1, 150).astype(int)
            target_len = np.clip(np.rint(source_len * rng.lognormal(0.05, 0.15, n)), 1, 160).astype(int)
            for lengths, words, f in ((source_len, source_words, fs), (target_len, target_words, ft)):
                flat = words[rng.choice(WORDS_PER_SIDE, lengths.sum(), p=zipf)]
                ends = np.cumsum(lengths)
                f.write("".join(" ".join(flat[e - k:e]) + "\n" for e, k in zip(ends, lengths)))
    for p in paths:
        os.replace(p + ".part", p)
    return paths


# --- measurements (each in a process of its own; --quick: in this one) ---------

def time_pipeline(build, rounds, batches):
    """First-batch seconds and per-round real target tokens/s of the dataset `build()` makes."""
    start = time.perf_counter()
    iterator = iter(build())
    next(iterator)
    first = time.perf_counter() - start
    rates = []
    for _ in range(rounds):
        tokens, start = 0, time.perf_counter()
        for _ in range(batches):
            _, target_out = next(iterator)
            tokens += int(np.count_nonzero(target_out.numpy()))
        rates.append(tokens / (time.perf_counter() - start))
    return first, rates


def measure(args):
    """One measurement (`args.measure`: "raw", "prepared" or "train"), a dict."""
    import tensorflow as tf

    from keras_attention import data
    from keras_attention.training.corpus import STATS_SAMPLE

    source_tok, target_tok = data.PreparedCorpus(args.prepared).tokenizers()
    if args.measure == "raw":
        def build():
            report = data.CorpusReport()
            pairs = data.load_parallel_files(*args.files, report=report, max_words=250, max_ratio=9.0)
            return data.make_translation_dataset(
                pairs, source_tok, target_tok, None, batch_tokens=args.batch_tokens, max_length=256,
                bucket_boundaries="auto", pad_to_bucket_boundary=True, drop_remainder=True, shuffle=True,
                seed=0, cache=False, stats_sample=STATS_SAMPLE, report=report).repeat()
        first, rates = time_pipeline(build, args.rounds, args.batches)
        result = dict(first_batch_seconds=first, pipeline_target_tokens_per_second=statistics.median(rates),
                      rounds=rates)
    elif args.measure == "prepared":
        def build():
            return data.PreparedCorpus(args.prepared).dataset(batch_tokens=args.batch_tokens, seed=0, repeat=True)
        first, rates = time_pipeline(build, args.rounds, args.batches)
        result = dict(first_batch_seconds=first, pipeline_target_tokens_per_second=statistics.median(rates),
                      rounds=rates)
    else:
        result = measure_training(args, tf, data, source_tok, target_tok)
    result["peak_rss_mb"] = peak_rss_mb()
    result["device"] = tf.config.list_logical_devices()[-1].device_type
    return result


def measure_training(args, tf, data, source_tok, target_tok):
    """Real target tokens/s of the `small` (or `--quick`: `tiny`) Transformer's compiled training step."""
    import keras

    from benchmark_training import StepTimes
    from keras_attention.models import PRESETS, Transformer
    from keras_attention.training import MaskedSparseCrossEntropy

    batches = list(data.PreparedCorpus(args.prepared).dataset(batch_tokens=args.batch_tokens, seed=0)
                   .take(args.train_batches))
    real_tokens = statistics.mean(int(np.count_nonzero(z.numpy())) for _, z in batches)
    ds = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=(
        (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)),
        tf.TensorSpec([None, None], tf.int32))).cache().repeat()
    keras.utils.set_random_seed(0)
    model = Transformer(source_tok.vocab_size, target_tok.vocab_size, max_length=512, **PRESETS[args.preset])
    (source, target_in), _ = batches[0]
    model((source[:1], target_in[:1]))  # built: the optimizer is then built before the step is traced
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCrossEntropy(), jit_compile=args.jit)
    model.fit(ds, steps_per_epoch=len(batches), epochs=1, verbose=0, shuffle=False)  # compiles every shape
    rates = []
    for _ in range(args.rounds):
        timer = StepTimes()
        model.fit(ds, steps_per_epoch=args.train_steps + 1, epochs=1, verbose=0, callbacks=[timer], shuffle=False)
        rates.append(args.train_steps * real_tokens / (timer.times[-1] - timer.times[0]))
    return dict(training_target_tokens_per_second=statistics.median(rates), rounds=rates,
                preset=args.preset, jit_compile=args.jit, mean_real_target_tokens_per_batch=real_tokens)


def run_child(args, measure_name, **paths):
    """`measure` in a fresh process (its peak RSS its own); with --quick in this one (TensorFlow starts once)."""
    if args.quick:
        return measure(argparse.Namespace(**{**vars(args), **paths, "measure": measure_name}))
    command = [sys.executable, "-u", os.path.abspath(__file__), "--measure", measure_name,
               "--batch-tokens", str(args.batch_tokens), "--rounds", str(args.rounds),
               "--batches", str(args.batches), "--train-steps", str(args.train_steps),
               "--train-batches", str(args.train_batches), "--jit" if args.jit else "--no-jit",
               "--preset", args.preset, "--prepared", paths["prepared"]]
    if "files" in paths:
        command += ["--files", *paths["files"]]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"benchmark_data: the {measure_name} measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the run -------------------------------------------------------------------

def prepare_corpora(args, work):
    """Generate each size's text, one tokenizer pair, and each size's prepared records."""
    from keras_attention import data

    corpora = {}
    for pairs in args.sizes:
        folder = os.path.join(work, f"pairs_{pairs}")
        os.makedirs(folder, exist_ok=True)
        start = time.perf_counter()
        files = generate_corpus(folder, pairs)
        log(f"{pairs:,} pairs: text ready ({os.path.getsize(files[0]) / 2**20:.0f} + "
            f"{os.path.getsize(files[1]) / 2**20:.0f} MB, {time.perf_counter() - start:.0f} s)")
        corpora[pairs] = dict(files=files, prepared=os.path.join(folder, "prepared"))
    import tensorflow as tf

    to_prepare = {pairs: c for pairs, c in corpora.items() if not data.is_prepared(c["prepared"])}
    if to_prepare:
        tokenizers = [data.SubwordTokenizer.from_dataset(tf.data.TextLineDataset(path).take(100_000),
                                                         vocab_size=8000)
                      for path in corpora[min(args.sizes)]["files"]]
    for pairs, corpus in to_prepare.items():
        start = time.perf_counter()
        report = data.CorpusReport()
        train = data.load_parallel_files(*corpus["files"], report=report, max_words=250, max_ratio=9.0)
        data.write_prepared_corpus(train, *tokenizers, corpus["prepared"], max_length=256, report=report,
                                   num_pairs=pairs, seed=0)
        corpus["prepare_seconds"] = time.perf_counter() - start
        log(f"{pairs:,} pairs: prepared in {corpus['prepare_seconds']:.0f} s")
    return corpora


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="corpus sizes in pairs (default: 500000 5000000; "
                        "--quick: 1000 5000)")
    parser.add_argument("--work", help="folder for the generated corpora (kept; default: a temporary one)")
    parser.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=100, help="batches a pipeline round")
    parser.add_argument("--train-steps", type=int, default=10, help="steps a training round")
    parser.add_argument("--train-batches", type=int, default=8,
                        help="distinct batches the training step cycles through (each shape compiles once)")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                        help="compile the training step with XLA, as train does by default (--quick: no)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and model, no XLA, measured in this process: to test the script")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--measure", choices=["raw", "prepared", "train"], help=argparse.SUPPRESS)
    parser.add_argument("--prepared", help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args)))  # the last line, read by `run_child`
        return None
    if args.quick:
        args.rounds, args.batches, args.train_steps, args.preset = 2, 5, 2, "tiny"
        args.train_batches, args.jit = 2, False
        args.batch_tokens = 1024
    args.sizes = args.sizes or ([1000, 5000] if args.quick else [500_000, 5_000_000])
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or scratch
        corpora = prepare_corpora(args, work)
        training = run_child(args, "train", prepared=corpora[min(args.sizes)]["prepared"])
        log(f"training step ({args.preset} Transformer, {training['device']}): "
            f"{training['training_target_tokens_per_second']:,.0f} target tokens/s")
        rows = []
        for pairs, corpus in corpora.items():
            for source in ("raw", "prepared"):
                r = run_child(args, source, **corpus)
                row = dict(pairs=pairs, source=source, **r,
                           ratio_to_training=r["pipeline_target_tokens_per_second"]
                           / training["training_target_tokens_per_second"])
                if source == "prepared" and "prepare_seconds" in corpus:
                    row["prepare_seconds"] = corpus["prepare_seconds"]
                rows.append(row)
                log(f"{pairs:>10,} {source:9s} first batch {r['first_batch_seconds']:6.1f} s  "
                    f"{r['pipeline_target_tokens_per_second']:>10,.0f} target tokens/s "
                    f"({row['ratio_to_training']:5.1f}x training)  peak RSS {r['peak_rss_mb']:6.0f} MB")
    small, large = min(args.sizes), max(args.sizes)
    rss = {s: {r["source"]: r["peak_rss_mb"] for r in rows if r["pairs"] == s} for s in (small, large)}
    growth = {source: rss[large][source] / rss[small][source] - 1 for source in ("raw", "prepared")}
    log("peak RSS growth from {:,} to {:,} pairs: raw {:+.1%}, prepared {:+.1%}".format(
        small, large, growth["raw"], growth["prepared"]))
    result = dict(command="python scripts/benchmark_data.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  date=time.strftime("%Y-%m-%d"), machine=machine(), device=training["device"],
                  batch_tokens=args.batch_tokens, rounds=args.rounds,
                  batches_per_round=args.batches, rows=rows, training=training,
                  training_target_tokens_per_second=training["training_target_tokens_per_second"],
                  peak_rss_growth=growth)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
