"""`keras-attention demo`: train a small attention model, report BLEU, translate, save.

It uses Multi30k (English -> German) when the files can be read or
downloaded, and otherwise the generated dates corpus, and says which and why.
It replaces the run of an earlier demo in its output folder, and no other.
"""

import json
import os
import sys

from keras_attention.base.corpus_files import sha256_of
from keras_attention.base.files import RunPaths, write_json
from keras_attention.cli.reporting import print_summary
from keras_attention.training.recipe import TrainConfig, train

# A hidden file (a run folder ignores it) the demo writes when it has finished: the SHA-256 of that run's
# results.json. A later demo replaces the run only while the two still match, so never a run trained there since.
DEMO_MARK = ".keras-attention-demo"
EXAMPLES = {
    "multi30k": ["A man in a blue shirt is riding a bike.", "Two dogs play in the snow."],
    "dates": ["3 March 1999", "Tuesday, July 4, 2023", "le 14 juillet 1989"],
}


def _choose_data(data_dir):
    """("multi30k" or "dates", reason)."""
    from keras_attention.data import load_multi30k

    try:
        load_multi30k("en", "de", "val", data_dir=data_dir)
    except Exception as error:  # no files and no download: fall back, say why
        return "dates", f"Multi30k could not be read or downloaded ({type(error).__name__}: {error})"
    return "multi30k", "Multi30k was found (or downloaded)"


def demo_config(output_dir, quick=False, data_dir=None):
    """The demo's `TrainConfig` and a sentence saying which data it uses and why."""
    if quick:
        # Seconds, for tests: a tiny Bahdanau model on a few hundred pairs.
        config = TrainConfig.from_flat(
            model="bahdanau", preset="tiny", dataset="dates", vocab_size=200, target_vocab_size=40, max_length=48,
            epochs=1, batch_size=32, max_train_examples=256, bleu_sample=16, jit_compile=False,
            output_dir=output_dir, overrides={"units": 32, "embedding_dim": 16},
        )
        return config, "quick mode: a few hundred generated dates"
    dataset, reason = _choose_data(data_dir)
    if dataset == "multi30k":
        config = TrainConfig.from_flat(
            model="transformer", preset="tiny", dataset="multi30k", source="en", target="de",
            data_dir=data_dir, vocab_size=6000, max_length=48, epochs=4, batch_size=64,
            output_dir=output_dir, bleu_sample=100,
        )
    else:
        config = TrainConfig.from_flat(
            model="bahdanau", preset="tiny", dataset="dates", vocab_size=200, target_vocab_size=40,
            max_length=48, epochs=8, batch_size=64, learning_rate=3e-3, max_train_examples=8000,
            output_dir=output_dir, bleu_sample=100, overrides={"units": 96, "embedding_dim": 32},
        )
    return config, reason


def run_demo(output_dir="runs/demo", quick=False, data_dir=None):
    """Train, evaluate, translate and save; return a process exit code."""
    _check_folder(output_dir)  # first: choosing the data may download Multi30k
    config, reason = demo_config(output_dir, quick=quick, data_dir=data_dir)
    # An earlier demo's run is replaced, but only once this one has finished.
    config = config.replace(overwrite=True)
    print(f"Demo: {config.model.kind} ({config.model.preset}) on {config.data.dataset}: {reason}.")
    # Progress bars for a terminal; one line an epoch for a log file or a quick run.
    translator, results = train(config, verbose=1 if sys.stdout.isatty() and not quick else 2)
    paths = RunPaths(output_dir)
    write_json(os.path.join(output_dir, DEMO_MARK), {"results_sha256": sha256_of(paths.results)})

    print_summary(results)
    print("\nTranslations:")
    for sentence, output in zip(EXAMPLES[config.data.dataset], translator(EXAMPLES[config.data.dataset])):
        print(f"  {sentence}\n    -> {output}")
    saved = paths.translator
    print(f"\nSaved the translator to {saved}. Try:\n"
          f"  keras-attention translate {saved} \"{EXAMPLES[config.data.dataset][0]}\"")
    return 0


def _check_folder(output_dir):
    """Refuse `output_dir` when it holds a run that is not the one a demo finished there."""
    if not os.path.isdir(output_dir):
        return  # new, or a file: the run folder's own check names it
    held = RunPaths(output_dir).held()
    if held and not _demo_finished_here(output_dir):
        raise ValueError(f"{output_dir} holds a run that is not one the demo finished there ({', '.join(held)}); "
                         "the demo replaces only its own: give it another --output, or move that run first.")


def _demo_finished_here(output_dir):
    results = RunPaths(output_dir).results
    try:
        with open(os.path.join(output_dir, DEMO_MARK), encoding="utf-8") as f:
            mark = json.load(f)
        return isinstance(mark, dict) and mark.get("results_sha256") == sha256_of(results)
    except (OSError, ValueError):  # no mark, no results.json, or a mark that is not ours
        return False
