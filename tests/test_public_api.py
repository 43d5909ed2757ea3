"""The public API: every exported name resolves, `import keras_attention` stays light."""

import importlib
import os
import subprocess
import sys

import pytest

import keras_attention

PUBLIC = ["keras_attention", "keras_attention.layers", "keras_attention.models", "keras_attention.data",
          "keras_attention.decoding", "keras_attention.explain", "keras_attention.training", "keras_attention.serving",
          "keras_attention.explain.plotting", "keras_attention.cli"]


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_name_in_all_resolves(module_name):
    module = importlib.import_module(module_name)
    assert module.__all__ and len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module_name}.{name}"


def test_top_level_names_are_the_real_objects():
    from keras_attention.decoding.translator import Translator
    from keras_attention.serving.export import export

    assert keras_attention.Translator is Translator and keras_attention.export_translator is export
    with pytest.raises(AttributeError, match="no attribute 'Translater'"):
        keras_attention.Translater  # noqa: B018


def test_importing_the_package_does_not_start_tensorflow():
    code = "import sys, keras_attention, keras_attention.cli; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


# A user's script: load a `.keras` model of our layers after `{first}` alone.
_LOAD = """
import sys
{first}
from keras import models
import numpy as np
print(tuple(models.load_model(sys.argv[1])(np.array([[4, 9, 2, 0]])).shape), "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("first", ["import keras_attention", "import keras, keras_attention"])
def test_import_keras_attention_alone_lets_keras_load_our_layers_without_tensorflow(first, tmp_path):
    """Loaded under JAX, so that the test also shows the registration imports no TensorFlow."""
    import keras

    from keras_attention import layers

    ids = keras.Input((None,), dtype="int32")
    x = layers.PositionalEmbedding(vocab_size=30, d_model=8, mask_zero=True)(ids)
    x = layers.TransformerEncoder(num_heads=2, intermediate_dim=16)(x)
    keras.Model(ids, x).save(tmp_path / "model.keras")
    done = subprocess.run([sys.executable, "-c", _LOAD.format(first=first), str(tmp_path / "model.keras")],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, KERAS_BACKEND="jax"),
                          cwd=tmp_path)
    assert done.stdout.split() == ["(1,", "4,", "8)", "False"], done.stderr[-2000:]
