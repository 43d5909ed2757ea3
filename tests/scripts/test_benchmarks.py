"""Each benchmark script runs in quick mode and compares like with like (no timing asserts)."""

import json
import sys

import numpy as np
import tensorflow as tf
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import benchmark_attention  # noqa: E402
import benchmark_decoding  # noqa: E402
import benchmark_dropout  # noqa: E402
import benchmark_training  # noqa: E402


def test_training_benchmark_compares_equal_models(tmp_path):
    out = tmp_path / "training.json"
    result = benchmark_training.main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["parameters"] == result["parameters"]
    ours, hub = result["parameters"]["ours"], result["parameters"]["keras_hub"]
    assert abs(ours / hub - 1) < 0.01
    c = dict(benchmark_training.CONFIG, num_layers=1, d_model=32, num_heads=2, intermediate_dim=64,
             vocab=200, batch=4, length=8)
    batch = benchmark_training.random_batch(c)
    shapes = {tuple(m(batch[0]).shape) for m in (benchmark_training.ours(c), benchmark_training.keras_hub_model(c))}
    assert shapes == {(4, 8, 200)}
    assert result["median_tokens_per_second"]["ours"] > 0 and result["matmul_peak_gflops"] > 0


def test_attention_benchmark_runs(tmp_path):
    out = tmp_path / "attention.json"
    rows = benchmark_attention.main(["--quick", "--json", str(out)])
    assert [(r["pass"], r["length"]) for r in rows] == [
        ("forward", 16), ("forward", 32), ("forward+backward", 16), ("forward+backward", 32)]
    assert json.loads(out.read_text())["rows"][0]["ours"]["seconds"] > 0
    # Memory comes from XLA's buffer assignment: the backward pass keeps more.
    for layer in ("ours", "keras"):
        forward, backward = rows[1][layer]["memory_mib"], rows[3][layer]["memory_mib"]
        assert 0 < forward < backward


def test_decoding_benchmark_runs(tmp_path):
    out = tmp_path / "decoding.json"
    result = benchmark_decoding.main(["--quick", "--json", str(out)])
    assert [(r["batch"], r["tokens"]) for r in result["rows"]] == [(2, 4), (2, 8)]
    row = json.loads(out.read_text())["rows"][1]
    assert row["uncached_s"] > 0 and row["greedy_4x_rows_s"] > 0
    assert row["beam4_over_floor"] == row["beam4_s"] / row["greedy_4x_rows_s"]


def test_dropout_benchmark_compares_the_same_distribution(tmp_path):
    out = tmp_path / "dropout.json"
    result = benchmark_dropout.main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["speed_ratio"] == result["speed_ratio"] > 0
    # Both stacks compute the same function in distribution: the gradient of
    # sum(dropout^2(x)) is the product of two masks scaled by 1 / 0.9^2.
    x = tf.ones((256, 256))
    for kind in ("ours", "keras"):
        grad = benchmark_dropout.stack(
            {"ours": benchmark_dropout.Dropout, "keras": benchmark_dropout.keras.layers.Dropout}[kind], 2, 0.1
        )(x).numpy()
        assert abs((grad != 0).mean() - 0.81) < 0.01
        np.testing.assert_allclose(np.unique(grad[grad != 0]), [1 / 0.9**2], rtol=1e-4)
