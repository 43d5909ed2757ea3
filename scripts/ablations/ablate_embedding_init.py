"""Why Luong attention under-fitted: the embedding initialisation, on the dates corpus.

Trains the recurrent models of `tests/training/test_learns_dates.py` (units
96, embeddings of 32, 6 epochs of 8,000 generated pairs, Adam at 3e-3) twice
per seed: with Keras' default embedding initialiser, U(-0.05, 0.05), and with
N(0, 1), the default of `Seq2SeqRNN` since this ablation. Each run reports
the per-epoch training loss and the exact match of greedy decoding on 400
test dates. Under Keras' default every signal starts tiny, and Luong's
bilinear score h_t^T W_a hbar_s, a product of two tiny vectors, starts flat
and learns slowly; Bahdanau's additive score is linear in each.

    python scripts/ablations/ablate_embedding_init.py --json benchmarks/embedding_init.json
    python scripts/ablations/ablate_embedding_init.py --models luong --seeds 0 --epochs 1   # a quick look
"""

import argparse
import json
import statistics
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from keras_attention import data
from keras_attention.base.files import write_json
from keras_attention.training.recipe import TrainConfig, train

INITIALIZERS = {
    "keras_uniform_0.05": {"class_name": "RandomUniform", "config": {"minval": -0.05, "maxval": 0.05}},
    "normal_1": {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": 1.0}},
}


def run(model, init, seed, epochs, test_pairs):
    """Train one dates model; return its loss history and exact match."""
    with tempfile.TemporaryDirectory() as folder:
        config = TrainConfig.from_flat(
            model=model, preset="tiny", dataset="dates", vocab_size=200, target_vocab_size=40, max_length=48,
            batch_size=64, max_train_examples=8000, max_test_examples=50, bleu_sample=0, label_smoothing=0.0,
            epochs=epochs, learning_rate=3e-3, seed=seed, output_dir=folder,
            overrides={"units": 96, "embedding_dim": 32, "embeddings_initializer": INITIALIZERS[init]},
        )
        started = time.time()
        translator, results = train(config, verbose=0)
        outputs = translator([source for source, _ in test_pairs])
    exact = float(np.mean([o == t for o, (_, t) in zip(outputs, test_pairs)]))
    return {
        "model": model, "init": init, "seed": seed, "exact_match": round(exact, 4),
        "loss": [round(x, 4) for x in results["history"]["loss"]], "seconds": round(time.time() - started),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["luong", "bahdanau"], choices=["luong", "bahdanau"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)

    device = tf.config.list_logical_devices()[-1].name
    print(f"device: {device}", flush=True)
    test_pairs = [(s.decode(), t.decode()) for s, t in data.load_dates(400, "test").as_numpy_iterator()]
    command = "python scripts/ablations/ablate_embedding_init.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    runs = []
    for model in args.models:
        for seed in args.seeds:
            for init in INITIALIZERS:
                runs.append(run(model, init, seed, args.epochs, test_pairs))
                r = runs[-1]
                print(f"{model:9s} seed {seed}  {init:18s} exact match {r['exact_match']:.3f}  "
                      f"loss by epoch {r['loss']}", flush=True)
                summary = {
                    f"{m}/{i}": statistics.median(r["exact_match"] for r in runs if (r["model"], r["init"]) == (m, i))
                    for m, i in sorted({(r["model"], r["init"]) for r in runs})
                }
                if args.json:  # after every run, so a stopped ablation keeps what it measured
                    write_json(args.json, {"command": command.strip(), "device": device, "epochs": args.epochs,
                                           "summary": summary, "runs": runs}, indent=1)
    print("median exact match:", json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
