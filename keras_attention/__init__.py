"""keras-attention: attention layers for Keras 3 and the models built from them."""

__version__ = "0.3.0"

# Environment variable naming the folder that holds the corpora (for example
# `multi30k/`); the data loaders look there before the Keras cache folder.
DATA_ENV_VAR = "KERAS_ATTENTION_DATA"

import importlib

# The public API, loaded on first use (PEP 562): `import keras_attention` stays
# light (the command line parses its arguments before TensorFlow starts), while
# `keras_attention.Translator`, `from keras_attention import layers`, ... work.
_SUBMODULES = ("data", "decoding", "explain", "layers", "models", "plotting", "serving", "training")
_NAMES = {
    "Translator": "keras_attention.decoding.translator",
    "TrainConfig": "keras_attention.training.recipe",
    "train": "keras_attention.training.recipe",
    "evaluate_bleu": "keras_attention.training.evaluation",
    "export_translator": "keras_attention.serving.export",
}

__all__ = ["DATA_ENV_VAR", "__version__", *_SUBMODULES, *_NAMES]


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"keras_attention.{name}")
    if name in _NAMES:
        module = importlib.import_module(_NAMES[name])
        return getattr(module, "export" if name == "export_translator" else name)
    raise AttributeError(f"module 'keras_attention' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
