"""Why Luong attention still trailed on Multi30k: unscaled scores saturate the softmax.

Trains `Seq2SeqRNN(attention="luong", luong_score="general")` with and without
`luong_scaled` (the "general" score divided by sqrt(units)), and Bahdanau's
model as the reference, on Multi30k en->de in the setting of tutorials 01-03
(embeddings 128, 256 units, dropout 0.1, Adam at 1e-3, 2 epochs). Each run
reports its per-epoch losses, greedy BLEU on the validation set (the test set
is not used), and how peaked its attention is on those sentences: the mean of
the largest weight of each output token, and the share of output tokens whose
largest weight falls on `[START]`.

    python scripts/ablations/ablate_luong_scale.py --json benchmarks/luong_scale.json
    python scripts/ablations/ablate_luong_scale.py --runs luong_scaled --max-train-examples 2000 \
        --max-valid-examples 100 --epochs 1  # a quick look
"""

import argparse
import json
import sys
import tempfile
import time

import numpy as np

from keras_attention import data
from keras_attention.base.files import write_json
from keras_attention.training.evaluation import evaluate_bleu
from keras_attention.training.recipe import TrainConfig, train

RUNS = {
    "luong_unscaled": dict(model="luong", overrides={"luong_scaled": False}),
    "luong_scaled": dict(model="luong", overrides={"luong_scaled": True}),
    "bahdanau": dict(model="bahdanau", overrides={}),
}
SIZES = {"embedding_dim": 128, "units": 256, "dropout": 0.1}


def attention_peaks(translator, sentences):
    """(mean largest weight per output token, share of output tokens peaking on position 0)."""
    result = translator.translate(sentences, return_attention=True)
    largest, on_start = [], []
    for weights, source, target in zip(result.attention, result.source_tokens, result.target_tokens):
        weights = weights[: len(target), : len(source)]  # (output tokens, source tokens)
        largest.extend(weights.max(-1))
        on_start.extend(weights.argmax(-1) == 0)
    return float(np.mean(largest)), float(np.mean(on_start))


def run(name, args, valid_pairs):
    with tempfile.TemporaryDirectory() as folder:
        config = TrainConfig.from_flat(
            model=RUNS[name]["model"], dataset="multi30k", data_dir=args.data_dir, vocab_size=4000,
            max_length=64, batch_size=128, epochs=args.epochs, learning_rate=1e-3, seed=args.seed,
            max_train_examples=args.max_train_examples, max_test_examples=1, bleu_sample=0, keep_checkpoints=0,
            output_dir=folder, overrides={**SIZES, **RUNS[name]["overrides"]},
        )
        started = time.time()
        translator, results = train(config, verbose=2)
        seconds = time.time() - started
        scores = evaluate_bleu(translator, valid_pairs)
        peak, on_start = attention_peaks(translator, [source for source, _ in valid_pairs[:200]])
    history = results["history"]
    return {
        "run": name, "seed": args.seed, "valid_bleu": round(scores["bleu"], 2),
        "valid_sentences": scores["num_sentences"],
        "loss": [round(x, 4) for x in history["loss"]],
        "val_loss": [round(x, 4) for x in history.get("val_loss", [])],
        "mean_largest_weight": round(peak, 3), "share_peaking_on_start": round(on_start, 3),
        "seconds": round(seconds),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-train-examples", type=int)
    parser.add_argument("--max-valid-examples", type=int, help="score only the first N validation pairs")
    parser.add_argument("--data-dir", help="the folder holding multi30k/ (default: $KERAS_ATTENTION_DATA)")
    parser.add_argument("--json", help="write the results here (after every run)")
    args = parser.parse_args(argv)

    import tensorflow as tf

    device = tf.config.list_logical_devices()[-1].name
    print(f"device: {device}", flush=True)
    valid = data.load_multi30k("en", "de", "val", args.data_dir)
    valid_pairs = [(s.decode(), t.decode()) for s, t in valid.as_numpy_iterator()][: args.max_valid_examples]
    command = "python scripts/ablations/ablate_luong_scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    runs = []
    for name in args.runs:
        runs.append(run(name, args, valid_pairs))
        print(json.dumps(runs[-1]), flush=True)
        if args.json:
            write_json(args.json, {"command": command.strip(), "device": device, "epochs": args.epochs,
                                   "settings": SIZES, "runs": runs}, indent=1)


if __name__ == "__main__":
    main()
