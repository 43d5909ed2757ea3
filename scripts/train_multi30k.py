"""Train and evaluate the Multi30k results table: RNN, Bahdanau, Luong, Transformer.

Each run is `keras_attention.training.recipe.train` with a fixed configuration,
writing to `OUTPUT/<model>-<src>-<tgt>/`. A run that finished (its
`results.json` exists) is skipped; an interrupted one resumes from its
`backup/` folder (Keras `BackupAndRestore`), so the script can be killed and
started again with the same command. After training, each run is scored on
test_2016_flickr with greedy decoding, beam search (4 hypotheses, GNMT length
penalty 0.6; a recipe in LENGTH_PENALTIES uses the one of its penalties that
scores best on the validation set), and the average of the last epochs'
checkpoints (Vaswani et al. 2017, section 6.1) decoded both ways (a recipe in
AVERAGE_COUNTS averages as many of them as score best on the validation set:
the count is chosen first, then the penalty); scores missing from an older
`results.json` are added the next time the script meets it. At the end it
prints the table: BLEU (sacreBLEU, cased 13a, and lower-cased), chrF and the
training time measured here. Copy a run's `results.json` to
`benchmarks/multi30k/<model>-<src>-<tgt>.json` and run `scripts/make_results.py`
to update the README and the results page.

    python scripts/train_multi30k.py --output runs/multi30k                # all runs
    python scripts/train_multi30k.py --models transformer --directions en-de
"""

import argparse
import glob
import json
import os
import sys

from results_common import bleu, moses_bleu_cell, training_time  # this folder: run as a script
from timing import commit

from keras_attention.base.files import RunPaths
from keras_attention.data import load_multi30k
from keras_attention.decoding import DecodingOptions
from keras_attention.decoding.translator import Translator
from keras_attention.training.averaging import average_translator
from keras_attention.training.evaluation import SCORE_KEYS, evaluate_bleu, moses_bleu
from keras_attention.training.recipe import TrainConfig, train

# One configuration per model; the same for both directions but where DIRECTION_CONFIGS says otherwise.
# Why each Transformer recipe is set as it is: docs/training.md ("The Multi30k recipes").
CONFIGS = {
    "rnn": dict(model="rnn", preset="small", epochs=12, learning_rate=1e-3, vocab_size=8000),
    "bahdanau": dict(model="bahdanau", preset="small", epochs=12, learning_rate=1e-3, vocab_size=8000),
    "luong": dict(model="luong", preset="small", epochs=12, learning_rate=1e-3, vocab_size=8000),
    "transformer": dict(model="transformer", preset="small", epochs=30, vocab_size=8000, warmup_steps=2000,
                        overrides=dict(dropout=0.3, attention_dropout=0.1)),
    # fairseq's Multi30k baseline: one vocabulary and one embedding matrix for both languages, lower-cased text.
    "transformer-shared": dict(model="transformer", preset="small", epochs=30, vocab_size=8000, warmup_steps=2000,
                               joint_vocabulary=True, share_embeddings=True, lower_case=True,
                               overrides=dict(dropout=0.3, attention_dropout=0.1)),
    # Wu et al. (2021)'s Transformer-tiny (fairseq's Multi30k baseline), as many epochs as fit in 88 minutes,
    # on cased text (the baseline lower-cases) so that it writes text a reader would accept.
    "transformer-tiny": dict(model="transformer", preset="tiny", epochs=80, time_limit_minutes=88, vocab_size=10000,
                             warmup_steps=2000, batch_tokens=4096, bucket_method="min_padding", peak_learning_rate=5e-3,
                             keep_checkpoints=30, joint_vocabulary=True, share_embeddings=True,
                             overrides=dict(num_layers=4, intermediate_dim=256, dropout=0.3)),
}
# Settings chosen for one direction on its own validation set.
DIRECTION_CONFIGS = {("transformer-tiny", "de-en"): dict(vocab_size=8000, lr_schedule="cosine", epochs=55)}
DIRECTIONS = ("en-de", "de-en")
# jit_compile=True: the committed runs compiled their training step with XLA; `train`'s default
# ("auto") would not for the Transformer's 30 x 29,000 pairs (base.options.XLA_MIN_PAIRS).
COMMON = dict(dataset="multi30k", max_length=64, batch_size=64, label_smoothing=0.1, jit_compile=True)
TEST_SPLIT = "test_2016_flickr"
VALIDATION_SPLIT = "val"
# Recipes that choose how many of the last checkpoints to average: each count is averaged and decoded
# greedily on the validation set, and the best (fewest on a tie) is the one scored on the test set.
# The others average every checkpoint they keep (the last 5).
AVERAGE_COUNTS = {"transformer-tiny": (5, 10, 15, 20, 25, 30)}
BEAM = DecodingOptions(method="beam")  # 4 hypotheses, GNMT length penalty 0.6
# Recipes that choose beam search's length penalty (GNMT's alpha) on the validation set, with their final
# model: its translations run shorter than the references, and a larger penalty lengthens them.
LENGTH_PENALTIES = {"transformer-tiny": (0.6, 1.0, 1.5, 2.0, 3.0)}
# --quick scores only the first test sentences (its models are untrained smoke).
QUICK_TEST_SENTENCES = 32


def recipe(model, direction):
    """The TrainConfig settings by flat name (but source, target and output_dir) of `model`'s run in
    `direction` ("en-de")."""
    return {**COMMON, **CONFIGS[model], **DIRECTION_CONFIGS.get((model, direction), {})}


def run(model, direction, output, quick=False):
    """Train (or resume, or skip) one run and score it; return its results dict."""
    source, target = direction.split("-")
    folder = os.path.join(output, f"{model}-{source}-{target}")
    results_path = RunPaths(folder).results
    if not os.path.exists(results_path):
        started_on = commit()  # the code the run trains with, before anyone checks out another
        options = recipe(model, direction)
        if quick:
            options.update(epochs=2, max_train_examples=512, vocab_size=1000, bleu_sample=8, preset="tiny",
                           jit_compile=False, max_test_examples=QUICK_TEST_SENTENCES)
        config = TrainConfig.from_flat(source=source, target=target, output_dir=folder, resume=True, **options)
        _, results = train(config, verbose=2)
        results["commit"] = started_on
        _write(results_path, results)
    else:
        with open(results_path, encoding="utf-8") as f:
            results = json.load(f)
    if score_more(folder, results, source, target, limit=QUICK_TEST_SENTENCES if quick else None,
                  counts=AVERAGE_COUNTS.get(model), penalties=LENGTH_PENALTIES.get(model)):
        _write(results_path, results)
    return results


def score_more(folder, results, source, target, limit=None, counts=None, penalties=None):
    """Add the test scores `results` lacks: beam search, averaged checkpoints.

    The greedy score of the trained model is the recipe's `results["test"]`.
    Here: `test` again if it lacks sacreBLEU's signature (as any score below does), `test_beam4` (the
    same model, beam search), and when the run kept
    two or more epoch checkpoints, `test_average` and `test_average_beam4`
    (their average, in the translator folder `translator-average/`). With
    `counts` (numbers of last checkpoints), the average is the one of those
    that scores best on the validation set (`choose_average`), recorded in
    `results["average_selection"]`; without, it is of every kept checkpoint.
    With `penalties` (GNMT length penalties), beam search uses the one that
    scores best on the validation set with the final model (the average, if
    any; `choose_length_penalty`), recorded in `results["length_penalty_selection"]`;
    without, `BEAM`'s. `limit`: score only the first `limit` sentences of each split.
    Returns whether anything was added.
    """
    # A score made before scores kept sacreBLEU's signature is made again (the same number, now signed).
    for key in ("test", "test_beam4", "test_average", "test_average_beam4"):
        if key in results and "bleu_signature" not in results[key]:
            del results[key]
    paths = RunPaths(folder)
    checkpoints = sorted(glob.glob(os.path.join(paths.checkpoints, "epoch-*.weights.h5")))
    choose = bool(counts) and len(checkpoints) > min(counts)
    averaged = len(checkpoints) > 1
    wanted = (["test", "test_beam4"] + (["test_average", "test_average_beam4"] if averaged else [])
              + (["average_selection"] if choose else []) + (["length_penalty_selection"] if penalties else []))
    if all(key in results for key in wanted):
        return False
    pairs = _pairs(source, target, TEST_SPLIT, limit)
    lower = results["config"].get("lower_case", False)
    translator_dir, average_dir = paths.translator, os.path.join(folder, "translator-average")
    if choose and "average_selection" not in results:
        results["average_selection"] = choose_average(translator_dir, checkpoints, counts, average_dir,
                                                      _pairs(source, target, VALIDATION_SPLIT, limit), lower)
        for key in ("test_average", "test_average_beam4"):  # scores of another average, if any
            results.pop(key, None)
    if averaged:
        if choose:
            checkpoints = checkpoints[-results["average_selection"]["chosen"]:]
        average_translator(translator_dir, checkpoints, average_dir, overwrite=True)  # made again: the chosen one
        results["averaged_checkpoints"] = [os.path.basename(p) for p in checkpoints]
    if penalties and "length_penalty_selection" not in results:
        final = Translator.load(average_dir if averaged else translator_dir)
        results["length_penalty_selection"] = choose_length_penalty(
            final, penalties, _pairs(source, target, VALIDATION_SPLIT, limit), lower)
        for key in ("test_beam4", "test_average_beam4"):  # scored with another penalty, if any
            results.pop(key, None)
    beam = BEAM.replace(length_penalty=results.get("length_penalty_selection", {}).get("chosen", BEAM.length_penalty))
    # Each translator folder is loaded (and its decoders compiled) once, for all its scores.
    for directory, keys in ((translator_dir, ["test", "test_beam4"]),
                            (average_dir, ["test_average", "test_average_beam4"])):
        missing = [key for key in keys if key in wanted and key not in results]
        if not missing:
            continue
        translator = Translator.load(directory)
        for key in missing:
            scores = evaluate_bleu(translator, pairs, beam if key.endswith("beam4") else None)
            results[key] = {k: scores[k] for k in SCORE_KEYS}
            # fairseq's way (lower-cased, Moses-tokenized), to compare with its published figures; labelled as such.
            results[key]["bleu_moses_lowercase"] = moses_bleu(scores["hypotheses"], scores["references"], target)
            print(f"{os.path.basename(folder)} {key}: BLEU {scores['bleu']:.2f} / {scores['bleu_lowercase']:.2f} "
                  f"(cased / lower-cased), chrF {scores['chrf']:.2f}")
    return True


def choose_length_penalty(translator, penalties, pairs, lower_case):
    """The GNMT length penalty (`alpha`) of beam search (`BEAM`'s beam size), chosen on `pairs` (the validation set).

    Each penalty in `penalties` decodes `pairs` with `translator`; the one
    whose BLEU is highest wins, the smaller on a tie (BLEU lower-cased for a
    lower-cased run, cased otherwise).

    Returns:
        dict: `split`, `measure` (in words), `bleu` (penalty, as a str -> BLEU) and `chosen` (float).
    """
    key = "bleu_lowercase" if lower_case else "bleu"
    scores = {}
    for alpha in sorted(set(penalties)):
        scores[alpha] = round(evaluate_bleu(translator, pairs, BEAM.replace(length_penalty=alpha))[key], 2)
        print(f"length penalty {alpha:g} on {VALIDATION_SPLIT}: BLEU {scores[alpha]:.2f} ({key}, "
              f"beam {BEAM.beam_size})")
    return _selection(scores, f"beam {BEAM.beam_size}", lower_case)


def _selection(scores, decoding, lower_case):
    """The record of a choice on the validation set: the setting of highest BLEU in `scores` (setting -> BLEU),
    the smaller on a tie, with every score and how they were measured."""
    chosen = max(scores, key=lambda setting: (scores[setting], -setting))
    return {"split": VALIDATION_SPLIT, "measure": f"BLEU{', lower-cased' if lower_case else ''}, {decoding}",
            "bleu": {f"{setting:g}": bleu for setting, bleu in scores.items()}, "chosen": chosen}


def choose_average(translator_dir, checkpoints, counts, output_dir, pairs, lower_case):
    """How many of the last `checkpoints` to average, chosen on `pairs` (the validation set).

    For each count in `counts` that the checkpoints allow, the average of the
    last that many is written to `output_dir` and decoded greedily; the count
    whose BLEU is highest wins, the smaller on a tie (BLEU lower-cased for a
    lower-cased run, cased otherwise).

    Returns:
        dict: `split`, `measure` (in words), `bleu` (count, as a str -> BLEU) and `chosen` (int).
    """
    key = "bleu_lowercase" if lower_case else "bleu"
    scores = {}
    for count in sorted(n for n in set(counts) if n <= len(checkpoints)):
        average_translator(translator_dir, checkpoints[-count:], output_dir, overwrite=True)
        scores[count] = round(evaluate_bleu(Translator.load(output_dir), pairs)[key], 2)
        print(f"{os.path.basename(os.path.dirname(output_dir))} average of the last {count} on {VALIDATION_SPLIT}: "
              f"BLEU {scores[count]:.2f} ({key}, greedy)")
    return _selection(scores, "greedy", lower_case)


def _pairs(source, target, split, limit=None):
    """The first `limit` (all when None) sentence pairs of a Multi30k split, as str."""
    pairs = list(load_multi30k(source, target, split).as_numpy_iterator())
    return [(s.decode("utf-8"), t.decode("utf-8")) for s, t in pairs][:limit]


def _write(path, results):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, ensure_ascii=False)


def table(rows):
    """The Markdown summary table: one line per run, BLEU as cased / lower-cased."""
    lines = [
        "| recipe | direction | BLEU greedy | BLEU beam 4 | BLEU averaged, beam 4 | the same, lower-cased on "
        "Moses tokens | chrF greedy | training time | parameters | commit |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for recipe, direction, results in rows:
        lower = results["config"].get("lower_case", False)
        averaged = results.get("test_average_beam4")
        lines.append(
            f"| {recipe} | {direction} | {bleu(results.get('test'), lower)} | "
            f"{bleu(results.get('test_beam4'), lower)} | {bleu(averaged, lower)} | {moses_bleu_cell(averaged)} | "
            f"{results['test']['chrf']:.1f} | {training_time(results)} | {results['parameters']:,} | "
            f"{results.get('commit', 'unknown')} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="runs/multi30k")
    parser.add_argument("--models", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--directions", nargs="+", default=list(DIRECTIONS))
    parser.add_argument("--quick", action="store_true", help="tiny runs, to test the script")
    args = parser.parse_args(argv)
    rows = [(m, d, run(m, d, args.output, args.quick)) for m in args.models for d in args.directions]
    print(f"\nMulti30k {TEST_SPLIT}, BLEU cased (13a) / lower-cased (commit: the one each run trained with):\n")
    print(table(rows))
    return rows


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # bad data, a full disk: one line, as the CLI prints them
        print(f"train_multi30k: error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("\ntrain_multi30k: interrupted; run the same command again to continue "
              "(finished runs are kept, the interrupted one resumes from its last backup).", file=sys.stderr)
        sys.exit(130)  # 128 + SIGINT, as the CLI and shells report it
