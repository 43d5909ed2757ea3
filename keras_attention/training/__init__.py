"""Losses, metrics, schedules and callbacks for training translators with `fit`."""

from keras_attention.training.losses import MaskedSparseCrossEntropy
from keras_attention.training.metrics import MaskedTokenAccuracy
from keras_attention.training.schedules import TransformerSchedule
