"""Losses, metrics, schedules and callbacks for training translators with `fit`.

The names load on first use (PEP 562), so that importing the serializable
classes (losses, metrics, optimizers, schedules) starts no TensorFlow.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for readers and the API reference
    from keras_attention.training.config import DataConfig, ModelConfig, OptimizationConfig, RunConfig
    from keras_attention.training.distribution import adapt_to_multi_worker, get_strategy
    from keras_attention.training.evaluation import evaluate_bleu, moses_bleu
    from keras_attention.training.losses import MaskedSparseCrossEntropy
    from keras_attention.training.metrics import MaskedTokenAccuracy
    from keras_attention.training.optimizers import SGD, Adam
    from keras_attention.training.recipe import TrainConfig, compile_for_training, train
    from keras_attention.training.schedules import TransformerSchedule

__all__ = [
    "Adam",
    "DataConfig",
    "MaskedSparseCrossEntropy",
    "MaskedTokenAccuracy",
    "ModelConfig",
    "OptimizationConfig",
    "RunConfig",
    "SGD",
    "TrainConfig",
    "TransformerSchedule",
    "adapt_to_multi_worker",
    "compile_for_training",
    "evaluate_bleu",
    "get_strategy",
    "moses_bleu",
    "train",
]

_MODULES = {
    "config": ("DataConfig", "ModelConfig", "OptimizationConfig", "RunConfig"),
    "distribution": ("adapt_to_multi_worker", "get_strategy"),
    "evaluation": ("evaluate_bleu", "moses_bleu"),
    "losses": ("MaskedSparseCrossEntropy",),
    "metrics": ("MaskedTokenAccuracy",),
    "optimizers": ("SGD", "Adam"),
    "recipe": ("TrainConfig", "compile_for_training", "train"),
    "schedules": ("TransformerSchedule",),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name):
    if name in _HOME:
        return getattr(importlib.import_module(f"keras_attention.training.{_HOME[name]}"), name)
    raise AttributeError(f"module 'keras_attention.training' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
