"""A/B of a translator's decoding speed between two commits, in alternated processes.

Each round starts one process per commit, the order alternating from round to
round, so that a slow moment of a shared machine hits both alike. A process
loads the same saved translator (`Translator.load(..., jit_compile=True)`;
`--no-xla` for the plain graph) with the code of its commit, translates the
first `--sentences` lines of `--source` in batches of `--batch` with greedy
decoding and beam 4, once to trace and compile, then `--passes` more times,
and reports the median sentences/s of each method. The commits' code is taken
with `git archive` into temporary folders put first on PYTHONPATH. The script
prints every round and the after/before ratios by median, checks that both
commits give the same translations, and with `--json`/`--key` merges the
record into that JSON file under `key` (other keys are kept).

    python scripts/ab_decoding.py runs/m30k/transformer-shared-en-de --before main --after compaction \\
        --json benchmarks/decoding.json --key chunks_ab
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from timing import device, machine

from keras_attention.base.files import translator_folder

METHODS = {"greedy": {}, "beam4": {"method": "beam", "beam_size": 4}}

# Runs in each process, with one commit's keras_attention first on the path.
CHILD = r"""
import gzip, json, statistics, sys, time
import keras_attention
from keras_attention.decoding.translator import Translator

folder, source, count, batch, passes, xla = sys.argv[1:7]
count, batch, passes = int(count), int(batch), int(passes)
opener = gzip.open if source.endswith(".gz") else open
with opener(source, "rt", encoding="utf-8") as f:
    lines = [line.rstrip("\n") for _, line in zip(range(count), f)]
translator = Translator.load(folder, jit_compile=xla == "xla")
report = {"package": keras_attention.__file__}
for name, options in json.loads(sys.argv[7]).items():
    def run():
        return [text for i in range(0, len(lines), batch)
                for text in translator.translate(lines[i:i + batch], **options).texts]
    started = time.perf_counter()
    texts = run()
    first = time.perf_counter() - started
    seconds = []
    for _ in range(passes):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    report[name] = {"sentences_per_second": len(lines) / statistics.median(seconds),
                    "first_pass_seconds": first, "texts": texts}
print("REPORT " + json.dumps(report))
"""


def export_commit(ref, folder):
    """The tracked files of commit `ref` of this repository, written into `folder`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archive = subprocess.run(["git", "-C", root, "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    return commit


def run_child(code_dir, args):
    command = [sys.executable, "-c", CHILD, args.translator, args.source, str(args.sentences), str(args.batch),
               str(args.passes), "plain" if args.no_xla else "xla", json.dumps(METHODS)]
    env = {**os.environ, "PYTHONPATH": code_dir, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=code_dir)
    if done.returncode != 0 or "REPORT " not in done.stdout:
        raise SystemExit(f"ab_decoding: the process for {code_dir} failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.split("REPORT ", 1)[1])
    if not report["package"].startswith(code_dir):
        raise SystemExit(f"ab_decoding: the process imported {report['package']}, not the code in {code_dir}")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("translator", help="a translator folder, or a run folder holding translator/")
    parser.add_argument("--before", required=True, help="a commit, branch or tag")
    parser.add_argument("--after", required=True, help="a commit, branch or tag")
    parser.add_argument("--source", help="source sentences, one a line (.gz allowed); default: Multi30k's "
                                         "test_2016_flickr.en.gz under $KERAS_ATTENTION_DATA")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--no-xla", action="store_true", help="decode in the plain graph, not with XLA")
    parser.add_argument("--json", help="a JSON file to merge the record into")
    parser.add_argument("--key", help="the key of the record in --json")
    args = parser.parse_args(argv)
    if bool(args.json) != bool(args.key):
        parser.error("--json and --key go together")
    args.translator = os.path.abspath(translator_folder(args.translator))  # a run folder: its translator/
    if args.source is None:
        data = os.environ.get("KERAS_ATTENTION_DATA")
        if not data:
            parser.error("give --source, or set KERAS_ATTENTION_DATA to the folder holding multi30k/")
        args.source = os.path.join(data, "multi30k", "test_2016_flickr.en.gz")
    args.source = os.path.abspath(args.source)

    with tempfile.TemporaryDirectory() as before_dir, tempfile.TemporaryDirectory() as after_dir:
        dirs = {"before": before_dir, "after": after_dir}
        commits = {"before": export_commit(args.before, before_dir), "after": export_commit(args.after, after_dir)}
        print(f"device: {device()}; before = {args.before} ({commits['before']}), "
              f"after = {args.after} ({commits['after']})", flush=True)
        rounds, texts = [], {}
        for number in range(args.rounds):
            order = ("before", "after") if number % 2 == 0 else ("after", "before")
            for variant in order:
                report = run_child(dirs[variant], args)
                texts.setdefault(variant, {m: report[m]["texts"] for m in METHODS})
                row = {"variant": variant}
                for method in METHODS:
                    row[f"{method}_sentences_per_second"] = round(report[method]["sentences_per_second"], 2)
                    row[f"{method}_first_pass_seconds"] = round(report[method]["first_pass_seconds"], 1)
                rounds.append(row)
                print(f"round {number}: {variant:6s} " + ", ".join(
                    f"{m} {row[f'{m}_sentences_per_second']:.1f} sent/s (first pass {row[f'{m}_first_pass_seconds']} s)"
                    for m in METHODS), flush=True)

    record = {"command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"), "machine": machine(),
              "device": device(), "commits": commits, "translator": args.translator, "xla": not args.no_xla,
              "sentences": args.sentences, "batch": args.batch, "passes": args.passes, "rounds": rounds}
    for method in METHODS:
        medians = {v: statistics.median(r[f"{method}_sentences_per_second"] for r in rounds if r["variant"] == v)
                   for v in ("before", "after")}
        same = sum(a == b for a, b in zip(texts["before"][method], texts["after"][method]))
        record[f"{method}_median_sentences_per_second"] = medians
        record[f"{method}_ratio_after_over_before"] = round(medians["after"] / medians["before"], 3)
        record[f"{method}_identical"] = f"{same}/{len(texts['before'][method])}"
        print(f"{method}: after/before {record[f'{method}_ratio_after_over_before']:.2f} by median, "
              f"identical translations {record[f'{method}_identical']}")
    if args.json:
        existing = {}
        if os.path.exists(args.json):
            with open(args.json, encoding="utf-8") as f:
                existing = json.load(f)
        existing[args.key] = record
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(existing, f, indent=2, ensure_ascii=False)
    return record


if __name__ == "__main__":
    main()
