"""Philox dropout: Keras' semantics (keep with 1 - rate, scale by 1 / (1 - rate)), checked statistically."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.layers import Dropout
from keras_attention.layers.dropout import philox_dropout

SHAPE = (64, 48, 64)  # 196,608 draws: the kept fraction is within 0.005 of 1 - rate (> 7 sigma)


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keeps_one_minus_rate_and_scales_the_rest(rate):
    x = np.random.default_rng(0).uniform(1.0, 2.0, size=SHAPE).astype("float32")
    y = keras.ops.convert_to_numpy(Dropout(rate, seed=3)(x, training=True))
    kept = y != 0
    assert abs(kept.mean() - (1 - rate)) < 0.005
    np.testing.assert_allclose(y[kept], x[kept] / (1 - rate), rtol=1e-6)
    # Independent positions: the mask is not correlated with its shifted self.
    a, b = kept[..., :-1].ravel(), kept[..., 1:].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02


def test_inference_is_identity_and_training_draws_new_masks():
    layer = Dropout(0.3, seed=1)
    x = np.ones((8, 32), "float32")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(x)), x)
    first = keras.ops.convert_to_numpy(layer(x, training=True))
    second = keras.ops.convert_to_numpy(layer(x, training=True))
    assert not np.array_equal(first, second)  # the seed generator advances


def test_same_seed_same_masks_and_xla_compiles():
    x = np.ones((4, 100), "float32")
    eager = [keras.ops.convert_to_numpy(Dropout(0.2, seed=7)(x, training=True)) for _ in range(2)]
    np.testing.assert_array_equal(eager[0], eager[1])
    # XLA's Philox stream is its own (TensorFlow promises equal streams only
    # for one device and op implementation), so check the distribution.
    layer = Dropout(0.2, seed=7)
    compiled = tf.function(lambda t: layer(t, training=True), jit_compile=True)
    y = compiled(np.ones(SHAPE, "float32")).numpy()
    assert set(np.unique(y).tolist()) == {0.0, 1.25}
    assert abs((y != 0).mean() - 0.8) < 0.005


def test_gradient_is_the_mask_times_the_scale():
    layer = Dropout(0.25, seed=2)
    x = tf.Variable(np.ones((16, 16), "float32"))
    with tf.GradientTape() as tape:
        y = layer(x, training=True)
        total = tf.reduce_sum(y)
    grad = tape.gradient(total, x).numpy()
    np.testing.assert_allclose(grad, y.numpy())  # x = 1: dy/dx is the scaled mask itself
    assert 0 < (grad == 0).sum() < grad.size


def test_mixed_precision_dtype():
    layer = Dropout(0.5, seed=0, dtype="mixed_float16")
    y = layer(np.ones((4, 8), "float16"), training=True)
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert set(np.unique(keras.ops.convert_to_numpy(y)).tolist()) <= {0.0, 2.0}


def test_config_and_keras_saving(tmp_path):
    layer = Dropout(0.4, seed=5, name="drop")
    clone = Dropout.from_config(layer.get_config())
    assert clone.rate == 0.4 and clone.seed == 5 and clone.name == "drop"
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(6), Dropout(0.4, seed=5)])
    path = os.path.join(str(tmp_path), "m.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert isinstance(reloaded.layers[-1], Dropout)
    x = np.ones((2, 6), "float32")
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)


def test_noise_shape_and_full_rate_fall_back_to_keras():
    x = np.ones((4, 10), "float32")
    y = keras.ops.convert_to_numpy(Dropout(0.5, noise_shape=(4, 1), seed=1)(x, training=True))
    assert all(len(set(row.tolist())) == 1 for row in y)  # one decision per row
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(Dropout(1.0)(x, training=True)), 0 * x)


def test_bad_rate_names_the_value():
    with pytest.raises(ValueError, match="1.5"):
        philox_dropout(tf.ones((2,)), 1.5, 0)
