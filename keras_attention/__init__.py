"""keras-attention: attention layers for Keras 3 and the models built from them."""

__version__ = "0.3.0"

# Environment variable naming the folder that holds the corpora (for example
# `multi30k/`); the data loaders look there before the Keras cache folder.
DATA_ENV_VAR = "KERAS_ATTENTION_DATA"

import importlib
import importlib.abc
import importlib.util
import sys

# The public API, loaded on first use (PEP 562): `import keras_attention` stays
# light (the command line parses its arguments before TensorFlow starts), while
# `keras_attention.Translator`, `from keras_attention import layers`, ... work.
_SUBMODULES = {name: f"keras_attention.{name}"
               for name in ("data", "decoding", "explain", "layers", "models", "serving", "training")}
_SUBMODULES["plotting"] = "keras_attention.explain.plotting"
_NAMES = {
    "DecodingOptions": "keras_attention.decoding.options",
    "Translator": "keras_attention.decoding.translator",
    "TrainConfig": "keras_attention.training.recipe",
    "train": "keras_attention.training.recipe",
    "evaluate_bleu": "keras_attention.training.evaluation",
    "export_translator": "keras_attention.serving.export",
}

__all__ = ["DATA_ENV_VAR", "__version__", *_SUBMODULES, *_NAMES]


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    if name in _NAMES:
        module = importlib.import_module(_NAMES[name])
        return getattr(module, "export" if name == "export_translator" else name)
    raise AttributeError(f"module 'keras_attention' has no attribute {name!r}")


# The modules whose classes `.keras` files name (layers, models, losses, metrics,
# schedules, optimizers); none of them imports TensorFlow.
_SERIALIZABLE = (
    "keras_attention.layers",
    "keras_attention.models",
    "keras_attention.training.losses",
    "keras_attention.training.metrics",
    "keras_attention.training.optimizers",
    "keras_attention.training.schedules",
)


def _register_serializables():
    for module in _SERIALIZABLE:
        importlib.import_module(module)


class _RegisterAfterKeras(importlib.abc.MetaPathFinder):
    """Registers our classes once Keras has loaded, so that `import keras_attention`
    alone lets `keras.models.load_model` find them, while the import itself stays
    light (the command line answers before Keras starts).

    It watches the imports of `keras` and of our own modules: when Keras is loaded
    and none of ours is half-imported (Keras is often first imported from inside
    one), it imports the modules that register the classes, then steps aside.
    """

    def __init__(self):
        self.depth = 0  # our modules being imported, one inside another

    def find_spec(self, name, path=None, target=None):
        ours = name.startswith("keras_attention.")
        if name != "keras" and not ours:
            return None
        spec = next((found for finder in sys.meta_path if finder is not self and hasattr(finder, "find_spec")
                     for found in [finder.find_spec(name, path, target)] if found is not None), None)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, run = spec.loader, spec.loader.exec_module

        def exec_module(module):
            del loader.exec_module  # the loader's own method again
            self.depth += ours
            try:
                run(module)
            finally:
                self.depth -= ours
            if self.depth == 0 and "keras" in sys.modules and self in sys.meta_path:
                sys.meta_path.remove(self)
                try:
                    _register_serializables()
                except Exception as error:  # never break the user's `import keras`
                    import warnings

                    warnings.warn(f"keras_attention could not register its classes for `.keras` loading "
                                  f"({type(error).__name__}: {error}); import keras_attention.layers and "
                                  "keras_attention.models yourself before loading.", stacklevel=2)

        loader.exec_module = exec_module
        return spec


if "keras" in sys.modules:
    _register_serializables()
elif not any(isinstance(finder, _RegisterAfterKeras) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterKeras())


def __dir__():
    return sorted(set(globals()) | set(__all__))
