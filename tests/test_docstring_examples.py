"""Every `>>>` example in the package's docstrings runs and prints what it says.

Each module's examples run with that module's names in scope (doctest's
convention), so an example must import anything else it uses, as a reader
copying it would. Examples that need a trained model, a corpus or a server are
marked `# doctest: +SKIP` in their docstring.
"""

import doctest
import importlib
import pathlib

import keras
import numpy as np
import pytest

import keras_attention

PACKAGE = pathlib.Path(keras_attention.__file__).parent
MODULES = sorted(
    "keras_attention." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts).replace(".__init__", "")
    for path in PACKAGE.rglob("*.py")
    if ">>>" in path.read_text(encoding="utf-8")
)


def test_the_examples_are_found():
    assert "keras_attention.layers.multi_head_attention" in MODULES and "keras_attention.decoding.greedy" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_run(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in doctest.DocTestFinder().find(module, name):
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_the_readme_tour_of_the_layers_runs_with_the_shapes_it_states():
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("## A tour of the layers", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(block, "README.md: A tour of the layers", "exec"), scope)
    # The shapes its comments give: context (2, 5, 8) and weights (2, 5, 5) from the first call.
    context, weights = scope["layers"].scaled_dot_product_attention(scope["q"], scope["k"], scope["v"])
    assert tuple(context.shape) == (2, 5, 8) and tuple(weights.shape) == (2, 5, 5)
    assert tuple(scope["y"].shape) == (2, 6, 32) and tuple(scope["scores"].shape) == (2, 4, 6, 6)
    assert tuple(scope["out"].shape) == (1, 3, 32)
    # Its functional model gives the context and the weights of every decoder step.
    encoder_states = np.random.default_rng(0).normal(size=(2, 9, 32)).astype("float32")
    context, weights = scope["aligner"].predict([encoder_states[:, :4], encoder_states], verbose=0)
    assert context.shape == (2, 4, 32) and weights.shape == (2, 4, 9)


def test_the_layers_page_functional_models_run_save_and_reload(tmp_path, monkeypatch):
    page = (PACKAGE.parent / "docs" / "layers.md").read_text(encoding="utf-8")
    block = page.split("## In your own functional models", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(block, "docs/layers.md: In your own functional models", "exec"), scope)
    data = np.random.default_rng(0)
    encoder_states = data.normal(size=(2, 7, 32)).astype("float32")
    context, alignment = scope["aligner"].predict([encoder_states[:, :3], encoder_states], verbose=0)
    assert context.shape == (2, 3, 32) and alignment.shape == (2, 3, 7)
    np.testing.assert_allclose(alignment.sum(-1), 1.0, atol=1e-5)
    ids = np.array([[5, 17, 3, 0, 0], [8, 2, 9, 4, 1]])
    label, scores = scope["classifier"].predict(ids, verbose=0)
    assert label.shape == (2, 2) and scores.shape == (2, 4, 5, 5)
    np.testing.assert_array_equal(scores[0, :, :3, 3:], 0.0)  # the padding gets no attention
    reloaded = keras.models.load_model(tmp_path / "classifier.keras")
    for got, want in zip(reloaded.predict(ids, verbose=0), (label, scores)):
        np.testing.assert_allclose(got, want, atol=1e-6)
    target = np.array([[1, 9, 4], [1, 6, 0]])
    logits, own, cross = scope["core"].predict([ids, target], verbose=0)
    assert logits.shape == (2, 3, 8000) and own.shape == (2, 4, 3, 3) and cross.shape == (2, 4, 3, 5)
    np.testing.assert_array_equal(own[..., 0, 1:], 0.0)  # causal: the first position reads only itself
    np.testing.assert_array_equal(cross[0, :, :, 3:], 0.0)  # the source's padding gets no attention
    summary, weights, mixed, heads = scope["pooled"].predict(encoder_states, verbose=0)
    assert summary.shape == (2, 32) and weights.shape == (2, 7) and mixed.shape == (2, 7, 32)
    assert heads.shape == (2, 2, 7, 7)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_the_layers_page_cache_loop_gives_the_full_pass():
    page = (PACKAGE.parent / "docs" / "layers.md").read_text(encoding="utf-8")
    block = page.split("## Masks and caches", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    steps = []
    scope = {"keras": keras, "layers": keras_attention.layers, "print": print}
    code = block.replace("self_attention_cache_update_index=i)", "self_attention_cache_update_index=i); "
                         "steps.append(step)")
    scope["steps"] = steps
    exec(compile(code, "docs/layers.md: Masks and caches", "exec"), scope)
    assert len(steps) == 5
    np.testing.assert_allclose(np.concatenate([keras.ops.convert_to_numpy(s) for s in steps], axis=1),
                               keras.ops.convert_to_numpy(scope["full"]), atol=1e-5)
