"""Losses, metrics, schedules and callbacks for training translators with `fit`."""

from keras_attention.training.distribution import adapt_to_multi_worker, get_strategy
from keras_attention.training.losses import MaskedSparseCrossEntropy
from keras_attention.training.metrics import MaskedTokenAccuracy
from keras_attention.training.optimizers import SGD, Adam
from keras_attention.training.schedules import TransformerSchedule
from keras_attention.training.evaluation import evaluate_bleu, moses_bleu
from keras_attention.training.recipe import TrainConfig, train

__all__ = [
    "Adam",
    "MaskedSparseCrossEntropy",
    "MaskedTokenAccuracy",
    "SGD",
    "TrainConfig",
    "TransformerSchedule",
    "adapt_to_multi_worker",
    "evaluate_bleu",
    "get_strategy",
    "moses_bleu",
    "train",
]
