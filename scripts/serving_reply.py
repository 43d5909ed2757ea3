"""The example TF Serving reply in README.md and docs/serving.md, computed from a trained run.

    python scripts/serving_reply.py                       # trains the README's model first (~6 min on 2 cores)
    python scripts/serving_reply.py --run runs/tiny-en-de # or reads a run trained by that command

The run's translator is exported as the README exports it (beam search, 4
hypotheses), the README's request body goes through TF Serving's handling of a
predict request (`tests/serving/tf_serving_emulator.py`, no server needed) and
the reply is written to `benchmarks/serving_reply.json`, with what
`saved_model_cli show --all` prints for the export. Then
`python scripts/make_reference_pages.py` copies them into README.md and docs/serving.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TRAIN = ["--preset", "tiny", "--epochs", "3"]  # README: `keras-attention train --preset tiny --epochs 3`
REQUEST = {"instances": ["A man in a blue shirt is riding a bike.", "Two dogs are playing in the snow."]}
OUT = os.path.join(ROOT, "benchmarks", "serving_reply.json")


def check_run(run):
    """Refuse a run that is not the README's model (Multi30k en->de Transformer, tiny preset, 3 epochs)."""
    with open(os.path.join(run, "results.json"), encoding="utf-8") as f:
        config = json.load(f)["config"]
    wanted = dict(model="transformer", preset="tiny", epochs=3, dataset="multi30k", source="en", target="de")
    differs = {k: config.get(k) for k, v in wanted.items() if config.get(k) != v}
    if differs:
        sys.exit(f"serving_reply: {run} is not `keras-attention train {' '.join(TRAIN)}`: it has {differs}")


def saved_model_cli(path):
    """What `saved_model_cli show --dir PATH --all` prints (TensorFlow's tool, from this Python's environment)."""
    tool = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    done = subprocess.run([tool, "show", "--dir", path, "--all"], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if done.returncode != 0:
        sys.exit(f"serving_reply: saved_model_cli failed:\n{done.stderr[-3000:]}")
    return done.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a run folder of `keras-attention train --preset tiny --epochs 3` "
                                      "(default: train one in a temporary folder)")
    parser.add_argument("--json", default=OUT, help="where to write the reply (default: %(default)s)")
    args = parser.parse_args(argv)

    import tensorflow as tf

    from keras_attention.cli import main as cli
    from keras_attention.decoding import Translator
    from keras_attention.serving import export
    from tests.serving.tf_serving_emulator import rest_predict

    with tempfile.TemporaryDirectory() as scratch:
        run = args.run
        if run is None:
            run = os.path.join(scratch, "run")
            if cli(["train", *TRAIN, "--output", run]) != 0:
                sys.exit("serving_reply: training failed")
        check_run(run)
        path = export(Translator.load(run), os.path.join(scratch, "translator"), "beam")
        signatures = tf.saved_model.load(path).signatures
        reply = json.loads(rest_predict(signatures, json.dumps(REQUEST)))
        shown = saved_model_cli(path)
    result = dict(command="python scripts/serving_reply.py" + (" --run RUN" if args.run else ""),  # no local path
                  date=time.strftime("%Y-%m-%d"), train_command="keras-attention train " + " ".join(TRAIN),
                  export="beam", request=REQUEST, reply=reply, saved_model_cli=shown)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(json.dumps(reply, ensure_ascii=False))
    return result


if __name__ == "__main__":
    main()
