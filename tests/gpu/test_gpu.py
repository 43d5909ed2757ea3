"""On a GPU: mixed-precision training and MirroredStrategy over every visible GPU.

Marked `gpu`; they skip where TensorFlow sees no GPU (as on CI's CPU machine).
`scripts/gpu_check.sh` runs them together with the GPU benchmarks.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.models import Transformer
from keras_attention.training import MaskedSparseCrossEntropy, optimizers
from keras_attention.training.distribution import set_precision

GPUS = tf.config.list_physical_devices("GPU")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not GPUS, reason="no GPU visible to TensorFlow: run scripts/gpu_check.sh on a machine with one"),
]
VOCAB = 32


def _copy_batches(batch=32, length=12, count=50):
    """Targets copy the sources: `count` batches of random ids (no padding)."""
    rng = np.random.default_rng(0)
    source = rng.integers(3, VOCAB, (count * batch, length)).astype("int32")
    target_in = np.concatenate([np.ones((len(source), 1), "int32"), source], axis=1)
    target_out = np.concatenate([source, np.full((len(source), 1), 2, "int32")], axis=1)
    return tf.data.Dataset.from_tensor_slices(((source, target_in), target_out)).batch(batch)


def _train(steps_data, strategy=None):
    with (strategy or tf.distribute.get_strategy()).scope():
        model = Transformer(VOCAB, VOCAB, num_layers=2, d_model=64, num_heads=4, intermediate_dim=128,
                            dropout=0.0, max_length=16)
        model.compile(optimizers.Adam(1e-3), loss=MaskedSparseCrossEntropy(), jit_compile=True)
    return model, model.fit(steps_data, epochs=1, verbose=0, shuffle=False).history


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_50_steps_on_a_gpu(policy):
    set_precision(policy)
    try:
        losses = []
        record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: losses.append(logs["loss"]))
        model = Transformer(VOCAB, VOCAB, num_layers=2, d_model=64, num_heads=4, intermediate_dim=128,
                            dropout=0.0, max_length=16)
        model.compile(optimizers.Adam(1e-3), loss=MaskedSparseCrossEntropy(), jit_compile=True)
        model.fit(_copy_batches(), epochs=1, verbose=0, callbacks=[record], shuffle=False)
    finally:
        set_precision("float32")
    assert len(losses) == 50 and np.all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


def test_mirrored_strategy_over_every_gpu():
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == len(GPUS)
    model, history = _train(_copy_batches(batch=16 * len(GPUS)), strategy)
    assert np.isfinite(history["loss"][0])
