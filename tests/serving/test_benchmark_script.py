"""scripts/benchmark_serving.py and scripts/benchmark_inference.py in quick mode, and the lower-precision copies
the inference benchmark exports."""

import gc
import json
import os
import subprocess
import sys

import numpy as np

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "benchmark_serving.py")


def test_benchmark_script_quick(exports, multi30k_dir, tmp_path):
    out = tmp_path / "serving.json"
    done = subprocess.run(
        [sys.executable, "-u", SCRIPT, exports["greedy"], os.path.dirname(exports["beam"]),
         "--quick", "--batch-sizes", "1", "4", "--data-dir", multi30k_dir, "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    report = json.loads(out.read_text())
    assert report["imported"] == []  # neither keras_attention nor keras_hub
    rows = [(r["decoding"].split(",")[0], r["batch_size"], r["sentences"]) for r in report["results"]]
    beam = "beam 3 (alpha 0.6)"
    assert rows == [("greedy", 1, 8), ("greedy", 4, 8), (beam, 1, 8), (beam, 4, 8)]
    assert all(r["sentences_per_second"] > 0 for r in report["results"])
    assert "sentences/s" in done.stdout


INFERENCE_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "benchmark_inference.py")


def test_inference_benchmark_quick(translator_dir, multi30k_dir, tmp_path):
    # The graph compiler only: XLA-compiled exports decode as the plain ones (tests/serving/test_export.py), and
    # their compilations would take most of this test's time.
    out = tmp_path / "inference.json"
    done = subprocess.run(
        [sys.executable, "-u", INFERENCE_SCRIPT, str(translator_dir), "--quick", "--compilers", "graph",
         "--engines", "savedmodel", "ctranslate2", "--precisions", "float32", "--data-dir", multi30k_dir,
         "--json", str(out)],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    keys = {"engine", "precision", "method", "batch_size", "sentences_per_second", "target_tokens_per_second",
            "peak_rss_mb"}
    cases = [(r["engine"], r["precision"], r["method"], r["batch_size"], r["jit_compile"]) for r in report["results"]]
    assert sorted(cases) == sorted((engine, "float32", method, 4, False) for engine in ("savedmodel", "ctranslate2")
                                   for method in ("greedy", "beam"))
    for result in report["results"]:
        assert keys <= set(result) and result["sentences_per_second"] > 0 and 50 < result["peak_rss_mb"] < 20000
        # The resident memory after each stage (read from /proc: Linux only), never above the process' peak.
        if sys.platform.startswith("linux"):
            assert list(result["rss_mb"]) == ["engine", "imports", "loaded", "warmed_up"]
            assert all(0 < mb <= result["peak_rss_mb"] for mb in result["rss_mb"].values())
    # The same weights decoded greedily by two engines: the same sentences.
    assert report["greedy_identical_fraction"] == 1.0 and report["greedy_differences"] == []
    assert report["bleu"]["savedmodel/float32/greedy"] == report["bleu"]["ctranslate2/float32/greedy"]
    assert report["xla_identical_fraction"] == {}  # nothing compiled with XLA to compare
    assert set(report["ratios"]) == {"savedmodel_over_ctranslate2_float32_beam_batch4"}
    assert "tokens/s" in done.stdout and report["device"]


def test_the_lower_precision_copies_hold_int8_and_bfloat16_weights_and_the_same_model(translator, monkeypatch):
    """The copies `--savedmodel-precisions` exports: int8 or bfloat16 weights, the float model's logits up to
    rounding, and the float translator left as it was."""
    monkeypatch.setattr(gc, "collect", lambda *args: 0)  # Keras collects for each weight it quantizes: slow here
    sys.path.insert(0, os.path.dirname(INFERENCE_SCRIPT))
    import benchmark_inference
    from keras import ops

    rng = np.random.default_rng(0)
    batch = (rng.integers(1, translator.source_tokenizer.vocab_size, (4, 9)).astype("int32"),
             rng.integers(1, translator.target_tokenizer.vocab_size, (4, 7)).astype("int32"))
    expected = ops.convert_to_numpy(translator.model(batch))
    for precision, tolerance in (("int8", 0.05), ("bfloat16", 0.05)):
        lower = benchmark_inference._at_precision(translator, precision)
        dtypes = {str(weight.dtype) for weight in lower.model.weights}
        assert (dtypes == {"bfloat16"}) if precision == "bfloat16" else ("int8" in dtypes), (precision, dtypes)
        error = np.abs(ops.convert_to_numpy(lower.model(batch)) - expected).max() / np.ptp(expected)
        assert error < tolerance, (precision, error)
    assert {str(weight.dtype) for weight in translator.model.weights} == {"float32"}
    assert benchmark_inference._at_precision(translator, "float32") is translator
