"""Inference speed of one trained Transformer: our SavedModel and Translator against CTranslate2.

One run, one model, the same sentences (Multi30k test_2016_flickr, 1,000
English sentences by default) through every path:

- `savedmodel`: our export (`keras_attention.serving.export`), loaded with
  TensorFlow and TensorFlow Text only, called through `serving_default`;
  float32, and with `--savedmodel-precisions` also the same weights in int8
  (Keras' `Model.quantize`) or bfloat16, with their speed over float32 in
  `ratios` and their BLEU;
- `translator`: our Python `Translator` (the same decoder, run from Python);
- `ctranslate2`: the model exported with `export_ctranslate2`, float32 and
  int8 weights, `intra_threads` = the cores, through `CTranslate2Translator`.

Each path decodes greedy and beam 4 (length penalty 0.6: GNMT's formula for
ours, `length ** 0.6` for CTranslate2), in batches of 1 and 32. Ours run twice,
as a TensorFlow graph and compiled with XLA (`jit_compile`: the export's and
the `Translator`'s switch); entries carry `jit_compile`. Each case runs
in its own process (so its peak resident memory is its own; `rss_mb` gives the
resident memory after the engine's import, all imports, the model's load and
the warm-up, to show where it goes), translates the sentences once to warm up
(tracing, and XLA's compilations: `warmup_seconds`) and then `--rounds` times;
the figure is the median round. Target tokens are counted the same way for
every path: the WordPiece pieces of its output text.
BLEU (sacreBLEU 13a) of each path's output, and the share of sentences whose
greedy output is the same in CTranslate2 float32 and in our SavedModel, go in
the JSON too.

    python -u scripts/benchmark_inference.py runs/multi30k/transformer-en-de \\
        --json benchmarks/inference.json

`--quick` (4 sentences, 1 round, batches of 4, every case in one child
process) is for the tests.
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from timing import device, peak_rss_mb, rss_mb, write_json  # noqa: E402
METHODS = {"greedy": {}, "beam": dict(beam_size=4, length_penalty=0.6)}


def read_pairs(data_dir, source, target, limit):
    def lines(language):
        with gzip.open(os.path.join(data_dir, f"test_2016_flickr.{language}.gz"), "rt", encoding="utf-8") as f:
            return f.read().split("\n")[:-1]

    sources, references = lines(source), lines(target)
    return sources[:limit], references[:limit]


# One case, in a child process -------------------------------------------------------------


def _translate_function(case, memory):
    """`(sentences) -> list of str` for the case's engine, loaded as a user would load it. Writes the
    process' resident MB into `memory` after the engine's own import ("engine": TensorFlow or
    CTranslate2), after every import the case needs ("imports") and after loading the model ("loaded")."""
    engine, options = case["engine"], METHODS[case["method"]]
    if engine == "savedmodel":  # the XLA export was written with jit_compile=True
        import tensorflow as tf
        memory["engine"] = rss_mb()
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
        memory["imports"] = rss_mb()

        signature = tf.saved_model.load(case["path"]).signatures["serving_default"]
        memory["loaded"] = rss_mb()
        return lambda batch: [t.decode("utf-8")
                              for t in signature(sentences=tf.constant(batch))["translations"].numpy()]
    if engine == "translator":
        import tensorflow  # noqa: F401
        memory["engine"] = rss_mb()
        from keras_attention.decoding.translator import Translator
        memory["imports"] = rss_mb()

        translator = Translator.load(case["path"], jit_compile=case["jit_compile"])
        memory["loaded"] = rss_mb()
        return lambda batch: translator(batch, method=case["method"], **options)
    import ctranslate2  # noqa: F401
    memory["engine"] = rss_mb()
    from keras_attention.serving import CTranslate2Translator  # our tokenizers, and with them TensorFlow
    memory["imports"] = rss_mb()

    translator = CTranslate2Translator(case["path"], device=case["device"], intra_threads=os.cpu_count())
    memory["loaded"] = rss_mb()
    return lambda batch: translator.translate(batch, method=case["method"], max_batch_size=len(batch), **options).texts


def run_case(case):
    """Warm up, then `rounds` timed passes; the median seconds, the outputs, the peak RSS and the
    resident memory after each stage (`_translate_function`'s, then "warmed_up")."""
    memory = {}
    translate = _translate_function(case, memory)
    sentences, size = case["sentences"], case["batch_size"]
    batches = [sentences[i: i + size] for i in range(0, len(sentences), size)]
    start = time.perf_counter()
    outputs = [t for batch in batches for t in translate(batch)]  # warm-up (traces, compiles)
    warmup = time.perf_counter() - start
    memory["warmed_up"] = rss_mb()
    seconds = []
    for _ in range(case["rounds"]):
        start = time.perf_counter()
        for batch in batches:
            translate(batch)
        seconds.append(time.perf_counter() - start)
    return {"seconds": statistics.median(seconds), "rounds": seconds, "warmup_seconds": warmup, "outputs": outputs,
            "peak_rss_mb": peak_rss_mb(), "rss_mb": memory if None not in memory.values() else {}}  # {}: no /proc


def _in_child(cases, work):
    """Run `cases` one after another in a fresh process; their results, in order."""
    case_file = os.path.join(work, "cases.json")
    with open(case_file, "w", encoding="utf-8") as f:
        json.dump(cases, f)
    done = subprocess.run([sys.executable, "-u", os.path.abspath(__file__), "--case", case_file],
                          capture_output=True, text=True)
    if done.returncode:
        names = ", ".join(f"{c['engine']} {c['method']} batch {c['batch_size']}" for c in cases)
        raise SystemExit(f"{names} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# The run ------------------------------------------------------------------------------------


def _at_precision(translator, precision):
    """`translator` with its matrix products in `precision`: "float32" (itself), "int8" (a copy whose
    Dense, EinsumDense and Embedding layers hold int8 weights, `Model.quantize`; the activations are
    quantized per call) or "bfloat16" (a copy built with bfloat16 weights and compute)."""
    import warnings

    import keras

    from keras_attention.decoding.translator import Translator

    if precision == "float32":
        return translator

    def with_policy(config):  # every float32 dtype policy of the serialized model, made `precision`
        if isinstance(config, dict):
            if config.get("class_name") == "DTypePolicy" and config["config"].get("name") == "float32":
                return {**config, "config": {**config["config"], "name": precision}}
            return {key: with_policy(value) for key, value in config.items()}
        return [with_policy(value) for value in config] if isinstance(config, list) else config

    config = keras.saving.serialize_keras_object(translator.model)
    if precision == "bfloat16":
        config, float32_config = with_policy(config), config
        if config == float32_config:
            raise SystemExit("bfloat16 needs a float32 model; this one has no float32 dtype policy")
    model = keras.saving.deserialize_keras_object(config)
    model.set_weights(translator.model.get_weights())
    if precision == "int8":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one warning per layer without an int8 kernel (softmax, norms)
            model.quantize("int8")
    return Translator(model, translator.source_tokenizer, translator.target_tokenizer, translator.max_source_length,
                      translator.max_target_length, metadata=translator.metadata)


def _exports(translator_dir, work, precisions, compilers, savedmodel_precisions=("float32",)):
    """The model each case loads, by `(engine, precision, method, jit_compile)`: our SavedModels
    (greedy, beam 4; graph and XLA; each of `savedmodel_precisions`), the translator folder (float32),
    the CTranslate2 models (`precisions`); and the dtypes of each precision's weights."""
    from keras_attention.decoding.translator import Translator
    from keras_attention.serving import export, export_ctranslate2

    translator = Translator.load(translator_dir)
    paths, weight_dtypes = {}, {}
    for precision in savedmodel_precisions:
        lower = _at_precision(translator, precision)
        weight_dtypes[precision] = sorted({str(weight.dtype) for weight in lower.model.weights})
        for jit_compile in (c == "xla" for c in compilers):
            for method in METHODS:
                folder = os.path.join(work, f"saved-{precision}-{method}" + ("-xla" if jit_compile else ""))
                paths["savedmodel", precision, method, jit_compile] = export(
                    lower, folder, method=method, jit_compile=jit_compile, **METHODS[method])
                if precision == "float32":
                    paths["translator", "float32", method, jit_compile] = translator_dir
    for precision in precisions:
        quantization = None if precision == "float32" else precision
        path = export_ctranslate2(translator, os.path.join(work, f"ct2-{precision}"), quantization=quantization)
        paths.update({("ctranslate2", precision, method, False): path for method in METHODS})
    return translator, paths, weight_dtypes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("translator", nargs="?",
                        help="a run folder (from train) or its translator/ folder (a Transformer)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: the JSON file of the cases to run here
    default_data = os.path.join(os.environ.get("KERAS_ATTENTION_DATA", ""), "multi30k")
    parser.add_argument("--data-dir", default=default_data, help="folder of the Multi30k .gz files")
    parser.add_argument("--sentences", type=int, default=1000, help="test sentences to translate (default: 1000)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--rounds", type=int, default=3, help="timed passes per case; the median is reported")
    parser.add_argument("--engines", nargs="+", default=["savedmodel", "translator", "ctranslate2"],
                        choices=["savedmodel", "translator", "ctranslate2"])
    parser.add_argument("--precisions", nargs="+", default=["float32", "int8"], choices=["float32", "int8"],
                        help="CTranslate2 weights to measure")
    parser.add_argument("--savedmodel-precisions", nargs="+", default=["float32"],
                        choices=["float32", "int8", "bfloat16"],
                        help="our exports' matrix products: float32, int8 (Keras' Model.quantize) or bfloat16")
    parser.add_argument("--compilers", nargs="+", default=["graph", "xla"], choices=["graph", "xla"],
                        help="our decoders: as a TensorFlow graph, compiled with XLA (jit_compile), or both")
    parser.add_argument("--quick", action="store_true",
                        help="4 sentences, 1 round, batches of 4, one child process: for the tests")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = parser.parse_args(argv)
    if args.case:
        with open(args.case, encoding="utf-8") as f:
            print(json.dumps([run_case(case) for case in json.load(f)]))
        return 0
    if not args.translator:
        parser.error("give the translator (a run folder or its translator/ folder)")
    if args.quick:
        args.sentences, args.rounds, args.batch_sizes = 4, 1, [4]

    import ctranslate2

    from keras_attention.training.evaluation import corpus_scores

    from keras_attention.base.files import translator_folder

    folder = translator_folder(args.translator)  # a run folder: its translator/
    ct2_device = "cuda" if ctranslate2.get_cuda_device_count() else "cpu"
    with tempfile.TemporaryDirectory() as work:
        translator, paths, weight_dtypes = _exports(
            folder, work, args.precisions, args.compilers, args.savedmodel_precisions)
        source, target = translator.languages
        sentences, references = read_pairs(args.data_dir, source or "en", target or "de", args.sentences)
        print(f"{len(sentences)} test sentences {source}->{target}; TensorFlow on {device()}; "
              f"CTranslate2 {ctranslate2.__version__} on {ct2_device}; {args.rounds} rounds, median", flush=True)
        cases = [dict(engine=engine, precision=precision, method=method, batch_size=batch_size, path=path,
                      sentences=sentences, rounds=args.rounds, device=ct2_device, jit_compile=jit_compile)
                 for (engine, precision, method, jit_compile), path in paths.items() if engine in args.engines
                 for batch_size in args.batch_sizes]
        # Each case in a process of its own; --quick runs them all in one (peak RSS is then the largest so far, and
        # each case's rss_mb includes what the cases before it left).
        measured_cases = (_in_child(cases, work) if args.quick
                          else [m for case in cases for m in _in_child([case], work)])
        results, texts = [], {}
        for case, measured in zip(cases, measured_cases):
            engine, precision, method, jit_compile, batch_size = (
                case["engine"], case["precision"], case["method"], case["jit_compile"], case["batch_size"])
            outputs = measured.pop("outputs")
            texts[(engine, precision, method, jit_compile)] = outputs
            tokens = int(translator.target_tokenizer.tokenize(outputs).row_lengths().numpy().sum())
            seconds = measured["seconds"]
            results.append(dict(
                engine=engine, precision=precision, method=method, batch_size=batch_size, jit_compile=jit_compile,
                sentences_per_second=round(len(sentences) / seconds, 2),
                target_tokens_per_second=round(tokens / seconds, 1), peak_rss_mb=measured["peak_rss_mb"],
                rss_mb=measured["rss_mb"],
                seconds=round(seconds, 3), rounds=[round(s, 3) for s in measured["rounds"]],
                warmup_seconds=round(measured["warmup_seconds"], 2),
            ))
            r = results[-1]
            name = engine + (" xla" if jit_compile else "")
            print(f"{name:<16} {precision:<8} {method:<7} batch {batch_size:>3}: "
                  f"{r['sentences_per_second']:8.2f} sentences/s {r['target_tokens_per_second']:9.1f} tokens/s "
                  f"peak RSS {r['peak_rss_mb']:7.1f} MB (warm-up {r['warmup_seconds']:.0f} s)", flush=True)
            if r["rss_mb"]:
                print(" " * 18 + "resident MB after " + ", ".join(f"{stage} {mb}" for stage, mb in r["rss_mb"].items()),
                      flush=True)

    bleu = {f"{engine}{'-xla' if jit else ''}/{precision}/{method}": round(corpus_scores(out, references)["bleu"], 2)
            for (engine, precision, method, jit), out in texts.items()}
    ours = texts.get(("savedmodel", "float32", "greedy", "graph" not in args.compilers))
    theirs = texts.get(("ctranslate2", "float32", "greedy", False))
    identical = None if ours is None or theirs is None else sum(a == b for a, b in zip(ours, theirs)) / len(ours)
    # The sentences where the two greedy outputs differ (the first ten), to explain each difference.
    differences = [] if identical is None else [
        dict(index=i, source=sentences[i], savedmodel=a, ctranslate2=b)
        for i, (a, b) in enumerate(zip(ours, theirs)) if a != b][:10]
    # XLA must not change a translation: the share of outputs equal to the graph's, per method.
    xla_identical = {(method if precision == "float32" else f"{precision} {method}"):
                     sum(a == b for a, b in zip(texts[key], texts[key[:3] + (True,)])) / len(sentences)
                     for key in texts for precision, method in [key[1:3]]
                     if key[0] == "savedmodel" and not key[3] and key[:3] + (True,) in texts}

    def tokens_per_second(engine, precision, method, batch_size, jit_compile=False):
        return next((r["target_tokens_per_second"] for r in results if (r["engine"], r["precision"], r["method"],
                     r["batch_size"], r["jit_compile"]) == (engine, precision, method, batch_size, jit_compile)), None)

    batch = max(args.batch_sizes)
    ratios = {}
    for jit_compile in (c == "xla" for c in args.compilers):
        for precision in ("float32", "int8"):
            ours_tps = tokens_per_second("savedmodel", "float32", "beam", batch, jit_compile)
            theirs_tps = tokens_per_second("ctranslate2", precision, "beam", batch)
            if ours_tps and theirs_tps:
                name = "savedmodel" + ("_xla" if jit_compile else "")
                ratios[f"{name}_over_ctranslate2_{precision}_beam_batch{batch}"] = round(ours_tps / theirs_tps, 3)
        for precision, method in ((p, m) for p in args.savedmodel_precisions if p != "float32" for m in METHODS):
            lower_tps = tokens_per_second("savedmodel", precision, method, batch, jit_compile)
            float32_tps = tokens_per_second("savedmodel", "float32", method, batch, jit_compile)
            if lower_tps and float32_tps:  # what the lower precision gains (or loses) against our float32 export
                name = "savedmodel" + ("_xla" if jit_compile else "")
                ratios[f"{name}_{precision}_over_float32_{method}_batch{batch}"] = round(lower_tps / float32_tps, 3)
    print(f"BLEU: {bleu}")
    print(f"greedy outputs identical (SavedModel vs CTranslate2 float32): {identical}")
    for d in differences:
        print(f"  sentence {d['index']}: ours {d['savedmodel']!r} / CTranslate2 {d['ctranslate2']!r}")
    print(f"SavedModel outputs identical with and without XLA: {xla_identical}")
    print(f"tokens/s ratios: {ratios}")
    write_json(args.json, {
        "model": folder, "sentences": len(sentences), "rounds": args.rounds, "ctranslate2": ctranslate2.__version__,
        "ctranslate2_device": ct2_device, "intra_threads": os.cpu_count(), "savedmodel_weight_dtypes": weight_dtypes,
        "greedy_identical_fraction": identical, "greedy_differences": differences,
        "xla_identical_fraction": xla_identical, "bleu": bleu, "ratios": ratios, "results": results,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
