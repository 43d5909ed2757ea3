"""How the Transformer's attention kernels start: head-wise Glorot against Keras' Glorot, on Multi30k.

Trains the `transformer` configuration of `scripts/train_multi30k.py` (small
preset, dropout 0.3, attention dropout 0.1, warm-up 2,000, batches of 64
pairs, XLA, 8 length buckets as its 30-epoch run has) for the first epochs
twice, from the same seed: with the attention kernels drawn by
`headwise_glorot_uniform` (the Transformer's default) and by Keras'
"glorot_uniform" (which `EinsumDense` gives the true input and output fans).
The warm-up schedule does not depend on the number of epochs, so these are
the first epochs of the full run. Each run reports, per epoch, the
validation loss, token accuracy and greedy BLEU on 200 validation
sentences (the recipe's own report; the test set is not read but for the
recipe's closing smoke of 10 sentences, not recorded here).

    python scripts/ablations/ablate_attention_init.py --json benchmarks/attention_init.json
    python scripts/ablations/ablate_attention_init.py --epochs 1 --inits glorot_uniform   # a quick look
"""

import argparse
import os
import sys
import tempfile
import time

from keras_attention.training.recipe import TrainConfig, train

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/
from timing import device, write_json  # noqa: E402
from train_multi30k import COMMON, CONFIGS  # noqa: E402

# None: the Transformer's default, `headwise_glorot_uniform()`.
INITIALIZERS = {"headwise_glorot_uniform": None, "glorot_uniform": "glorot_uniform"}
KEYS = ("loss", "val_loss", "val_token_accuracy", "val_bleu", "epoch_seconds")


def run(init, epochs, direction):
    """Train the first `epochs` epochs with one attention initialiser; return the per-epoch history."""
    source, target = direction.split("-")
    options = {**COMMON, **CONFIGS["transformer"]}
    overrides = dict(options.pop("overrides"))
    if INITIALIZERS[init] is not None:
        overrides["attention_kernel_initializer"] = INITIALIZERS[init]
    with tempfile.TemporaryDirectory() as folder:
        config = TrainConfig.from_flat(source=source, target=target, output_dir=folder, overrides=overrides,
                                       **{**options, "epochs": epochs, "length_buckets": 8, "max_test_examples": 10})
        started = time.time()
        _, results = train(config, verbose=2)
    history = results["history"]
    return {"init": init, "seconds": round(time.time() - started),
            **{key: [round(x, 4) for x in history[key]] for key in KEYS}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--direction", default="en-de", choices=["en-de", "de-en"])
    parser.add_argument("--inits", nargs="+", default=list(INITIALIZERS), choices=list(INITIALIZERS))
    parser.add_argument("--json", help="write the results here (after every run)")
    args = parser.parse_args(argv)

    print(f"device: {device()}", flush=True)
    runs = []
    for init in args.inits:
        runs.append(run(init, args.epochs, args.direction))
        r = runs[-1]
        print(f"{init:24s} validation loss {r['val_loss']}  token accuracy {r['val_token_accuracy']}  "
              f"BLEU {r['val_bleu']}", flush=True)
        if args.json:
            write_json(args.json, {"direction": args.direction, "epochs": args.epochs, "runs": runs})


if __name__ == "__main__":
    main()
