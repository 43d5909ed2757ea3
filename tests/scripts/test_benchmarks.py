"""Each benchmark script runs in quick mode and compares like with like (no timing asserts)."""

import argparse
import contextlib
import io
import json
import subprocess
import sys

import keras
import numpy as np
import pytest
from pathlib import Path

import keras_attention.layers

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import benchmark_attention  # noqa: E402
import benchmark_decoding  # noqa: E402
import benchmark_precision  # noqa: E402
import benchmark_training  # noqa: E402
import product_bound  # noqa: E402
import profile_training  # noqa: E402


def test_training_benchmark_compares_equal_models_and_bounds_the_step(tmp_path):
    # One run of the script (it compiles four models, without XLA: tracing is what
    # the test costs): the comparison and --product-bound.
    out = tmp_path / "training.json"
    result = benchmark_training.main(["--quick", "--no-xla", "--product-bound", "--json", str(out)])
    assert result["xla"] is False
    assert json.loads(out.read_text())["parameters"] == result["parameters"]
    ours, hub = result["parameters"]["ours"], result["parameters"]["keras_hub"]
    assert abs(ours / hub - 1) < 0.01
    c = benchmark_training.QUICK
    batch = benchmark_training.random_batch(c)
    shapes = {tuple(m(batch[0]).shape) for m in (benchmark_training.ours(c), benchmark_training.keras_hub_model(c))}
    assert shapes == {(4, 8, 200)}
    assert result["median_tokens_per_second"]["ours"] > 0 and result["matmul_peak_gflops"] > 0
    (ours_tps,), (hub_tps,) = result["tokens_per_second"]["ours"], result["tokens_per_second"]["keras_hub"]
    (peak,) = result["matmul_peaks"]
    (round_,) = result["rounds"]  # QUICK: one round
    assert round_["ratio"] == ours_tps / hub_tps
    assert round_["fraction_of_peak"] == ours_tps * result["flops_per_target_token"]["ours"] / 1e9 / peak

    # QUICK: 1 + 1 layers, d 32, 2 heads, d_ff 64, vocabulary 200, batch 4 x 8 (32 tokens).
    # Dense multiply-adds per token: encoder 4*32*32 + 2*32*64 = 8,192, decoder 8*32*32 + 2*32*64
    # = 12,288, output 32*200 = 6,400; x 2 FLOP x 32 tokens x 3 (forward, two gradients) = 5,160,960.
    # Attention: 3 blocks x 6 products x 2 * (4*2 batches) * 8 * 8 * 16 = 294,912.
    products = product_bound.step_products(c)
    assert sum(n * product_bound.product_flops(*key) for key, n in products.items()) == 5_160_960 + 294_912
    assert product_bound.product_flops("gqk,gqh->gkh", (8, 8, 8), (8, 8, 16)) == 2 * 8 * 8 * 8 * 16
    bound = result["product_bound"]
    assert bound["gflop_per_step"] == 5_455_872 / 1e9 and bound["seconds_per_step"] > 0
    # (6 + 10 + 1) dense, x 3; 6 per attention block
    assert sum(row["count"] for row in bound["products"]) == sum(products.values()) == 3 * 17 + 18
    assert json.loads(out.read_text())["product_bound"] == bound
    assert json.loads(out.read_text())["commit"]  # the code it measured


def _dropout_rates(model):
    """Sorted rates of every dropout a model applies: Dropout layers and attention-weight dropouts."""
    rates = []
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, (keras.layers.MultiHeadAttention, keras_attention.layers.MultiHeadAttention)):
            rates.append(("attention", layer.dropout))
        elif isinstance(layer, keras.layers.Dropout):
            rates.append(("dropout", layer.rate))
    return sorted(rates)


def test_training_benchmark_models_drop_out_alike():
    # keras-hub's blocks apply their `dropout` to the attention weights too; a
    # model without attention dropout would do less work per step. Counted
    # per layer object (ours shares one residual Dropout per block, keras-hub has
    # one per sublayer), the attention layers must match one for one.
    c = benchmark_training.QUICK
    ours, hub = benchmark_training.ours(c), benchmark_training.keras_hub_model(c)
    batch = benchmark_training.random_batch(c)
    ours(batch[0])
    attention = lambda m: [r for r in _dropout_rates(m) if r[0] == "attention"]  # noqa: E731
    assert attention(ours) == attention(hub) == [("attention", 0.1)] * 3  # 1 + 1 layers: 3 attention layers
    assert set(_dropout_rates(ours)) == set(_dropout_rates(hub))


def test_attention_benchmark_runs(tmp_path):
    out = tmp_path / "attention.json"
    rows = benchmark_attention.main(["--quick", "--json", str(out)])
    assert [(r["pass"], r["length"]) for r in rows] == [("forward", 16), ("forward+backward", 16)]
    assert json.loads(out.read_text())["rows"][0]["ours"]["seconds"] > 0
    # Memory comes from XLA's buffer assignment: the backward pass keeps more.
    for layer in ("ours", "keras"):
        forward, backward = rows[0][layer]["memory_mib"], rows[1][layer]["memory_mib"]
        assert 0 < forward < backward
    # Without a cache our layer is Keras' call: XLA compiles the same program, forward and backward.
    assert [r["same_program"] for r in rows] == [True] * 2


_HLO = """HloModule a_inference_{layer}_forward_12__XlaMustCompile_true, entry_computation_layout={{(f32[2,4]{{1,0}})}}

ENTRY %main.{n} (Arg_0.1: f32[2,4]) -> f32[2,4] {{
  %Arg_0.1 = f32[2,4]{{1,0}} parameter(0), metadata={{op_name="XLA_Args"}}
  %{layer}_dense_{n}.2 = f32[2,4]{{1,0}} {op}(%Arg_0.1, %Arg_0.1), metadata={{op_type="{layer}" op_name="{layer}/x"}}
  ROOT %tuple.3 = (f32[2,4]{{1,0}}) tuple(%{layer}_dense_{n}.2)
}}
"""


def test_two_hlo_modules_that_differ_only_in_names_are_the_same_program():
    ours = _HLO.format(layer="ours", n=5, op="add")
    assert benchmark_attention.canonical_hlo(ours) == benchmark_attention.canonical_hlo(
        _HLO.format(layer="keras_multi_head_attention_1", n=9, op="add"))
    assert benchmark_attention.canonical_hlo(ours) != benchmark_attention.canonical_hlo(
        _HLO.format(layer="keras", n=5, op="multiply"))


def test_decoding_benchmark_runs(tmp_path):
    out = tmp_path / "decoding.json"
    result = benchmark_decoding.main(["--quick", "--json", str(out)])
    assert [(r["batch"], r["tokens"]) for r in result["rows"]] == [(2, 4), (2, 8)]
    row = json.loads(out.read_text())["rows"][1]
    assert row["uncached_s"] > 0 and row["greedy_4x_rows_s"] > 0
    assert row["beam4_over_floor"] == row["beam4_s"] / row["greedy_4x_rows_s"]


def test_profile_attributes_the_step_to_categories(tmp_path):
    # A process of its own: XLA reads the dump flag the script sets only at its first compilation.
    out = tmp_path / "profile.json"
    script = Path(profile_training.__file__)
    done = subprocess.run([sys.executable, str(script), "--quick", "--json", str(out)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert "matrix products" in done.stdout
    assert set(result["categories_ms_per_step"]) == set(profile_training.CATEGORIES)
    assert abs(sum(result["shares"].values()) - 1) < 1e-9
    # Every step multiplies matrices and updates weights; nearly every event is attributed.
    assert result["categories_ms_per_step"]["matrix products"] > 0
    assert result["categories_ms_per_step"]["optimizer"] > 0
    assert result["unattributed_ms_per_step"] < 0.5 * result["operations_ms_per_step"]
    # Operations run at least one at a time, at most all at once; overlaps fit in their operations.
    assert 0 < result["busy_ms_per_step"] <= result["operations_ms_per_step"] + 1e-9
    for name, overlapped in result["top_operations_overlapped_ms_per_step"].items():
        assert 0 <= overlapped <= result["top_operations_ms_per_step"][name] + 1e-9
    assert all(rate > 0 for rate in result["top_operations_gflops"].values())
    assert result["matrix_product_gflop_per_step"] > 0 and result["matrix_product_gflops"] > 0


def test_profile_concurrency_of_hand_made_events():
    events = [
        ("A", 1, 0, 10),  # thread 1
        ("B", 2, 5, 15),  # thread 2: with A over [5, 10), with C over [10, 12)
        ("C", 1, 10, 12),  # thread 1, right after A
        ("D", 1, 20, 30),  # later, alone
        ("D", 2, 25, 40),  # the same operation on thread 2: overlaps the first over [25, 30)
    ]
    overlapped, busy = profile_training.concurrency(events)
    assert dict(overlapped) == {"A": 5, "B": 7, "C": 2, "D": 10}
    assert busy == 15 + 20  # [0, 15) and [20, 40)
    assert profile_training.concurrency([("E", 1, 3, 3)]) == ({}, 0)  # empty events count for nothing


def test_profile_dot_flops_of_hand_written_hlo():
    text = """
  %p0 = f32[6,4]{1,0} parameter(0)
  %p1 = f32[5,4]{1,0} parameter(1)
  %dot.1 = f32[6,5]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}, metadata={op_name="a"}
  %b = f32[2,3,6,7]{3,2,1,0} parameter(2)
  %c = f32[2,3,7,4]{3,2,1,0} parameter(3)
  %MatMul.2 = f32[2,3,6,4]{3,2,1,0} dot(%b, %c), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
  %add.3 = f32[6,5]{1,0} add(%dot.1, %dot.1)
"""
    # (6 x 4) . (5 x 4)^T: 30 outputs of 4 terms; batched (6 x 7) . (7 x 4) for 2 x 3 batches: 144 outputs of 7.
    assert profile_training.dot_flops(text) == {"dot.1": 2 * 30 * 4, "MatMul.2": 2 * 144 * 7}


def test_profile_reads_fusions_around_products_as_products():
    text = """%fused_computation.1 (param_0: f32[4,8], param_1: f32[8,3]) -> f32[4,3] {
  %param_0 = f32[4,8]{1,0} parameter(0)
  %param_1 = f32[8,3]{1,0} parameter(1)
  ROOT %dot.9 = f32[4,3]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="model/dense/MatMul"}
}

%fused_computation.2 (param_0.1: f32[4,8]) -> f32[4] {
  %param_0.1 = f32[4,8]{1,0} parameter(0)
  ROOT %reduce.1 = f32[4]{0} reduce(%param_0.1, %c), dimensions={1}, to_apply=%max, metadata={op_name="compile_loss/Max"}
}

ENTRY %main (a: f32[4,8], b: f32[8,3]) -> f32[4,3] {
  %ynn_fusion = f32[4,3]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.1
  %ynn_fusion.1 = f32[4]{0} fusion(%a), kind=kCustom, calls=%fused_computation.2
}
"""
    instructions = profile_training.read_hlo_instructions(text)
    categories = {name: profile_training.categorize(name, *instructions[name])
                  for name in ("ynn_fusion", "ynn_fusion.1")}
    assert categories == {"ynn_fusion": "matrix products", "ynn_fusion.1": "loss"}


def test_profile_categories_of_hand_written_instructions():
    categorize = profile_training.categorize
    assert categorize("MatMul.12", "custom-call", []) == "matrix products"
    assert categorize("dot.3", "dot", []) == "matrix products"
    assert categorize("fusion.1", "fusion", ["model/dropout_1/stateless_random_uniform"]) == "dropout bits"
    assert categorize("fusion.2", "fusion", ["adam/AssignSubVariableOp_3"]) == "optimizer"
    assert categorize("fusion.3", "fusion", ["compile_loss/masked_sparse_cross_entropy/Exp"]) == "loss"
    assert categorize("wrapped_reduce-window.4", "fusion", ["x_norm_1_moments_variance-reduction.2"]) == "layer norm"
    assert categorize("fusion.5", "fusion", ["model/encoder_0/self_attention_1/Exp"]) == "softmax"
    assert categorize("wrapped_reduce-window.6", "fusion", ["gradient_tape/dense_Sum-reduction.1"]) == "reductions"
    assert categorize("transpose_copy_fusion.7", "fusion", ["model/dense/Reshape"]) == "copies"
    assert categorize("add_fusion.8", "fusion", ["model/dense/BiasAdd"]) == "elementwise"


def test_data_benchmark_reports_every_size_and_source(tmp_path, monkeypatch):
    import benchmark_data

    out = tmp_path / "data_pipeline.json"
    # One size, read raw and prepared; --quick measures in this process.
    result = benchmark_data.main(["--quick", "--sizes", "1000", "--work", str(tmp_path), "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert [(r["pairs"], r["source"]) for r in result["rows"]] == [(1000, "raw"), (1000, "prepared")]
    assert result["peak_rss_growth"] == {"raw": 0.0, "prepared": 0.0}  # from the one size to itself
    training = result["training_target_tokens_per_second"]
    for row in result["rows"]:
        assert row["pipeline_target_tokens_per_second"] > 0 and row["first_batch_seconds"] > 0
        assert row["peak_rss_mb"] > 100  # TensorFlow alone takes more
        assert row["ratio_to_training"] == row["pipeline_target_tokens_per_second"] / training
    # The corpus has the documented shape: aligned, non-empty lines, median source length ~20 words.
    source, target = (tmp_path / "pairs_1000" / f"corpus.{side}" for side in ("en", "de"))
    source_lengths = [len(line.split()) for line in source.read_text().splitlines()]
    target_lengths = [len(line.split()) for line in target.read_text().splitlines()]
    assert len(source_lengths) == len(target_lengths) == 1000
    assert 18 <= np.median(source_lengths) <= 22 and 1 <= min(source_lengths) and max(source_lengths) <= 150
    assert 0.9 < np.median(np.array(target_lengths) / np.array(source_lengths)) < 1.2

    # The full run's way: each measurement a command line for a child process (run here, with its output read
    # as `run_child` reads a child's).
    def run_here(command, **kwargs):
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            assert benchmark_data.main(command[3:]) is None  # after python, -u and the script
        return subprocess.CompletedProcess(command, 0, printed.getvalue(), "")

    monkeypatch.setattr(benchmark_data.subprocess, "run", run_here)
    full = argparse.Namespace(quick=False, batch_tokens=1024, rounds=1, batches=2, train_steps=1, train_batches=1,
                              jit=False, preset="tiny")
    row = benchmark_data.run_child(full, "raw", files=[str(source), str(target)],
                                   prepared=str(tmp_path / "pairs_1000" / "prepared"))
    assert set(row) == set(result["rows"][0]) - {"pairs", "source", "ratio_to_training"}
    assert len(row["rounds"]) == 1 and row["pipeline_target_tokens_per_second"] > 0


def test_the_keras_hub_model_raises_no_mask_warnings():
    import warnings

    c = benchmark_training.QUICK
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        benchmark_training.keras_hub_model(c)(benchmark_training.random_batch(c)[0])
    assert not [w for w in caught if "mask" in str(w.message)], [str(w.message) for w in caught]


def test_the_xla_break_even_is_worked_out_from_the_measured_passes():
    import benchmark_xla_break_even as bench

    figures = {"pairs": {"xla": 1000, "no_xla": 1200},  # XLA drops its ragged batches: fewer pairs a pass
               "first_pass_seconds": {"xla": 200.0, "no_xla": 70.0},
               "median_pass_seconds": {"xla": 40.0, "no_xla": 60.0}}
    # compiling: (200 - 40) - (70 - 60) = 150 s; a pair: 60/1200 - 40/1000 = 0.01 s; 150 / 0.01 = 15,000 pairs
    assert bench.break_even(figures) == {"extra_compile_seconds": 150.0,
                                         "seconds_saved_a_pair": pytest.approx(0.01),
                                         "break_even_pairs": 15_000}
    figures["median_pass_seconds"]["xla"] = 50.0  # 0.05 s a pair both: XLA never catches up
    assert bench.break_even(figures)["break_even_pairs"] is None


def test_bucket_benchmark_trains_both_methods_on_the_same_pairs(tmp_path, multi30k_dir):
    import benchmark_buckets

    out = tmp_path / "buckets.json"
    result = benchmark_buckets.main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["methods"] == result["methods"]
    assert result["data"] == "Multi30k en->de" and result["batch_tokens"] > 0  # what make_results' note names
    equal, fewest = result["methods"]["equal_count"], result["methods"]["min_padding"]
    # The same pairs in both (quick mode keeps every batch): as many real target tokens, fewer padded ones.
    assert equal["real_target_tokens"] == fewest["real_target_tokens"] > 0
    assert fewest["real_target_tokens"] <= fewest["padded_target_tokens"]
    for method in (equal, fewest):
        assert method["median_epoch_seconds"] == method["epoch_seconds"][0] > 0  # one round
        assert method["real_target_tokens_per_second"] == method["real_target_tokens"] / method["epoch_seconds"][0]
    assert result["ratio_min_padding_over_equal_count"] == (fewest["real_target_tokens_per_second"]
                                                            / equal["real_target_tokens_per_second"])


def test_precision_benchmark_trains_one_model_under_each_variant(tmp_path):
    # Two variants without XLA (an XLA compile of the step is most of a variant's cost);
    # the default four are checked below without training.
    out = tmp_path / "precision.json"
    variants = ["mixed_bfloat16:no-xla", "float32:no-xla"]
    result = benchmark_precision.main(["--quick", "--variants", *variants, "--json", str(out)])
    assert result["variants"] == variants and result["reference"] == variants[0]
    assert json.loads(out.read_text())["speed_over_reference"]["mixed_bfloat16:no-xla"] == 1.0
    assert result["matmul_size"] == 256  # --quick
    assert set(result["matmul_gflops"]) == {"float32:xla", "float32:no-xla", "bfloat16:xla", "bfloat16:no-xla"}


def test_precision_benchmark_defaults_to_four_variants(monkeypatch):
    built = []

    def stop(c, variants, batch):
        built.append(list(variants.items()))
        raise KeyboardInterrupt  # the variants are all this test needs

    monkeypatch.setattr(benchmark_precision, "build_variants", stop)
    with pytest.raises(KeyboardInterrupt):
        benchmark_precision.main(["--quick"])
    assert built == [[("float32:xla", ("float32", True)), ("float32:no-xla", ("float32", False)),
                      ("mixed_bfloat16:no-xla", ("mixed_bfloat16", False)),
                      ("mixed_bfloat16:xla", ("mixed_bfloat16", True))]]


def test_precision_variants_are_one_model_in_other_dtypes():
    c = benchmark_precision.QUICK
    batch = benchmark_training.random_batch(c)
    models = benchmark_precision.build_variants(
        c, {"a": ("float32", False), "b": ("float32", True), "c": ("mixed_bfloat16", False)}, batch)
    assert models["c"].compute_dtype == "bfloat16" and models["c"].weights[0].dtype == "float32"
    logits = {name: keras.ops.convert_to_numpy(m(batch[0], training=False)).astype("float32")
              for name, m in models.items()}
    np.testing.assert_allclose(logits["b"], logits["a"], rtol=1e-5, atol=1e-5)  # XLA or not: one function
    # bfloat16 keeps 8 bits of mantissa: the same function to about 1%.
    np.testing.assert_allclose(logits["c"], logits["a"], atol=0.05 * np.abs(logits["a"]).max())


def test_precision_benchmark_refuses_a_bad_variant(capsys):
    with pytest.raises(SystemExit):
        benchmark_precision.main(["--quick", "--variants", "float64:xla"])
    assert "a variant is PRECISION:xla or PRECISION:no-xla" in capsys.readouterr().err


def test_precision_benchmark_refuses_a_variant_named_twice(capsys):
    with pytest.raises(SystemExit):
        benchmark_precision.main(["--quick", "--variants", "float32:xla", "mixed_bfloat16:no-xla", "float32:xla"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("each variant once; received float32:xla mixed_bfloat16:no-xla float32:xla")
