"""Throughput of exported translators, loaded with TensorFlow and TensorFlow Text only.

Loads each SavedModel the way a serving process would (no keras, no
keras_attention), translates the Multi30k test set (test_2016_flickr, 1,000
English sentences) through its `serving_default` signature in batches of each
size asked for, and prints sentences per second and the latency of a batch.
The decoding method is fixed at export time: pass one export per method.

    python -u scripts/benchmark_serving.py runs/export/greedy runs/export/beam4 \
        --batch-sizes 1 64 --json benchmarks/serving.json

Each path is a version folder (`.../1`) or a model base folder (its highest
version is used). `--quick` translates 8 sentences, for the tests.
"""

import argparse
import datetime
import gzip
import json
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the tokenizer ops)
from timing import write_json  # noqa: E402


def version_folder(path):
    """`path` if it holds a SavedModel, else its highest numbered sub-folder."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    versions = sorted((int(n) for n in os.listdir(path) if n.isdigit()), reverse=True)
    if not versions:
        raise SystemExit(f"No SavedModel in {path!r} (no saved_model.pb, no version folder).")
    return os.path.join(path, str(versions[0]))


def describe(folder):
    """A label such as "beam 4 (alpha 0.6)" from the export's metadata, if any."""
    metadata_path = os.path.join(folder, "assets.extra", "keras_attention.json")
    if not os.path.isfile(metadata_path):
        return os.path.basename(os.path.dirname(folder)) or folder, {}
    with open(metadata_path, encoding="utf-8") as f:
        metadata = json.load(f)
    if metadata["method"] == "beam":
        label = f"beam {metadata['beam_size']} (alpha {metadata['length_penalty']})"
    else:
        label = "greedy"
    return f"{label}, max {metadata['max_length']} tokens", metadata


def read_sentences(data_dir, language, limit):
    path = os.path.join(data_dir, f"test_2016_flickr.{language}.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        sentences = f.read().split("\n")[:-1]
    return sentences[:limit] if limit else sentences


def measure(translate, sentences, batch_size):
    """Translate all `sentences` in batches; return throughput and batch latencies."""
    batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
    translate(sentences=tf.constant(batches[0]))  # warm-up: first run builds the graph
    latencies, outputs = [], []
    started = time.perf_counter()
    for batch in batches:
        t0 = time.perf_counter()
        out = translate(sentences=tf.constant(batch))
        outputs.extend(out["translations"].numpy())  # .numpy() waits for the result
        latencies.append(time.perf_counter() - t0)
    seconds = time.perf_counter() - started
    latencies_ms = np.array(latencies) * 1000
    return {
        "batch_size": batch_size,
        "sentences": len(sentences),
        "seconds": round(seconds, 3),
        "sentences_per_second": round(len(sentences) / seconds, 2),
        "batch_ms_mean": round(float(latencies_ms.mean()), 2),
        "batch_ms_p50": round(float(np.percentile(latencies_ms, 50)), 2),
        "batch_ms_p90": round(float(np.percentile(latencies_ms, 90)), 2),
        "first_translation": outputs[0].decode("utf-8"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exports", nargs="+", help="SavedModel version folders or model base folders")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    default_data = os.path.join(os.environ.get("KERAS_ATTENTION_DATA", ""), "multi30k")
    parser.add_argument("--data-dir", default=default_data, help="folder of the Multi30k .gz files")
    parser.add_argument("--source", default="en", help="source language of the test file (default: en)")
    parser.add_argument("--limit", type=int, help="translate only the first N test sentences")
    parser.add_argument("--quick", action="store_true", help="8 sentences, for the tests")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    sentences = read_sentences(args.data_dir, args.source, 8 if args.quick else args.limit)
    environment = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "gpus": len(tf.config.list_physical_devices("GPU")),
    }
    settings = ", ".join(f"{k} {v}" for k, v in environment.items())
    print(f"{len(sentences)} sentences from {args.data_dir}; {settings}")
    results = []
    for path in args.exports:
        folder = version_folder(path)
        label, metadata = describe(folder)
        translate = tf.saved_model.load(folder).signatures["serving_default"]
        for batch_size in args.batch_sizes:
            result = {"export": folder, "decoding": label, **measure(translate, sentences, batch_size)}
            results.append(result)
            print(f"{label:<40} batch {batch_size:>3}: {result['sentences_per_second']:8.2f} sentences/s, "
                  f"{result['batch_ms_mean']:8.1f} ms a batch (p50 {result['batch_ms_p50']:.1f}, "
                  f"p90 {result['batch_ms_p90']:.1f}), {result['seconds']:.1f} s in all", flush=True)
    imported = sorted(m for m in sys.modules if m.split(".")[0] in ("keras_attention", "keras_hub"))
    write_json(args.json, {"environment": environment, "results": results, "imported": imported})
    return 0


if __name__ == "__main__":
    sys.exit(main())
