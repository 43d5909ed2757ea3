"""Train and evaluate the Multi30k results table: RNN, Bahdanau, Luong, Transformer.

Each run is `keras_attention.training.recipe.train` with a fixed configuration,
writing to `OUTPUT/<model>-<src>-<tgt>/`. A run that finished (its
`results.json` exists) is skipped; an interrupted one resumes from its
`backup/` folder (Keras `BackupAndRestore`), so the script can be killed and
started again with the same command. At the end it prints the table in the
Markdown of benchmarks/RESULTS.md, with BLEU on test_2016_flickr (sacreBLEU,
cased 13a, and lower-cased), chrF and the training time measured here.

    python scripts/train_multi30k.py --output runs/multi30k                # all runs
    python scripts/train_multi30k.py --models transformer --directions en-de
"""

import argparse
import json
import os
import subprocess

from keras_attention.training.recipe import TrainConfig, train

# One configuration per model; the same for both directions.
CONFIGS = {
    "rnn": dict(model="rnn", preset="small", epochs=12, learning_rate=1e-3, vocab_size=8000),
    "bahdanau": dict(model="bahdanau", preset="small", epochs=12, learning_rate=1e-3, vocab_size=8000),
    "luong": dict(model="luong", preset="small", epochs=12, learning_rate=1e-3, vocab_size=8000),
    "transformer": dict(model="transformer", preset="small", epochs=20, vocab_size=8000, warmup_steps=2000),
}
COMMON = dict(dataset="multi30k", lower_case=False, max_length=64, batch_size=64, label_smoothing=0.1)


def commit():
    """The checked-out commit (with `+` if the tree has changes), or "unknown"."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def run(model, direction, output, quick=False):
    source, target = direction.split("-")
    folder = os.path.join(output, f"{model}-{source}-{target}")
    results_path = os.path.join(folder, "results.json")
    if not os.path.exists(results_path):
        started_on = commit()  # the code the run trains with, before anyone checks out another
        options = {**COMMON, **CONFIGS[model]}
        if quick:
            options.update(epochs=1, max_train_examples=512, vocab_size=1000, bleu_sample=8, preset="tiny",
                           jit_compile=False)
        train(TrainConfig(source=source, target=target, output_dir=folder, **options), verbose=2)
        with open(results_path, encoding="utf-8") as f:
            results = json.load(f)
        results["commit"] = started_on
        with open(results_path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2, ensure_ascii=False)
        return results
    with open(results_path, encoding="utf-8") as f:
        return json.load(f)


def table(rows):
    lines = [
        "| model | direction | BLEU (cased, 13a) | BLEU (lower-cased) | chrF | training time | parameters | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model, direction, results in rows:
        test = results["test"]
        lines.append(
            f"| {model} | {direction} | {test['bleu']:.1f} | {test['bleu_lowercase']:.1f} | "
            f"{test['chrf']:.1f} | {results['train_seconds'] / 60:.0f} min | {results['parameters']:,} | "
            f"{results.get('commit', 'unknown')} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="runs/multi30k")
    parser.add_argument("--models", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--directions", nargs="+", default=["en-de", "de-en"])
    parser.add_argument("--quick", action="store_true", help="tiny runs, to test the script")
    args = parser.parse_args(argv)
    rows = [(m, d, run(m, d, args.output, args.quick)) for m in args.models for d in args.directions]
    print("\nMulti30k test_2016_flickr (commit: the one each run trained with):\n")
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
