"""`CPUDropout`: Keras' semantics (keep with 1 - rate, scale to keep the mean), checked statistically.

The ThreeFry path runs only inside XLA compilations on a CPU, so most checks call
the layer in a `tf.function(jit_compile=True)`; outside one it is Keras' dropout.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.cpu_dropout import CPUDropout as Dropout
from keras_attention.cpu_dropout import threefry_dropout, use_cpu_dropout
from keras_attention.models import Transformer

SHAPE = (64, 48, 64)  # 196,608 draws: the kept fraction is within 0.005 of 1 - rate (> 7 sigma)


def _xla(layer):
    return tf.function(lambda t: layer(t, training=True), jit_compile=True)


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keeps_one_minus_rate_and_scales_the_rest(rate):
    x = np.random.default_rng(0).uniform(1.0, 2.0, size=SHAPE).astype("float32")
    y = _xla(Dropout(rate, seed=3))(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - (1 - rate)) < 0.005
    # The rate is rounded to a multiple of 1/65536: 0.1 -> 6554/65536; 0.5 is exact.
    dropped_levels = {0.1: 6554, 0.5: 32768}[rate]
    np.testing.assert_allclose(y[kept], x[kept] * 65536 / (65536 - dropped_levels), rtol=1e-6)
    np.testing.assert_allclose(y[kept], x[kept] / (1 - rate), rtol=1e-4)
    assert abs(y.mean() / x.mean() - 1) < 0.01  # the expected output is the input
    # Independent positions: the mask is not correlated with its shifted self,
    # nor with the other half of the same 32-bit word.
    for a, b in ((kept[..., :-1], kept[..., 1:]), (kept[..., 0::2], kept[..., 1::2])):
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 0.02


def test_every_compiled_call_draws_a_new_mask():
    layer = Dropout(0.3, seed=1)
    x = np.ones((8, 32), "float32")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(x)), x)  # inference: the identity
    step = _xla(layer)
    masks = [step(x).numpy() != 0 for _ in range(3)]
    assert not np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[1], masks[2])
    eager = [keras.ops.convert_to_numpy(layer(x, training=True)) for _ in range(2)]
    assert not np.array_equal(eager[0], eager[1])  # Keras' dropout outside XLA, also advancing


def test_same_seed_same_masks():
    x = np.ones(SHAPE, "float32")
    first, second = (_xla(Dropout(0.2, seed=7))(x).numpy() for _ in range(2))
    np.testing.assert_array_equal(first, second)
    assert set(np.unique(first).tolist()) == {0.0, float(np.float32(65536 / (65536 - 13107)))}


def test_gradient_is_the_mask_times_the_scale():
    layer = Dropout(0.25, seed=2)
    x = tf.Variable(tf.ones((16, 16)))

    @tf.function(jit_compile=True)
    def forward_backward():
        with tf.GradientTape() as tape:
            y = layer(x, training=True)
            total = tf.reduce_sum(y)
        return y, tape.gradient(total, x)

    y, grad = (t.numpy() for t in forward_backward())
    np.testing.assert_allclose(grad, y)  # x = 1: dy/dx is the scaled mask itself
    assert 0 < (grad == 0).sum() < grad.size


def test_mixed_precision_dtype():
    layer = Dropout(0.5, seed=0, dtype="mixed_float16")
    y = _xla(layer)(np.ones((4, 8), "float16"))
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert set(np.unique(y.numpy()).tolist()) <= {0.0, 2.0}


def test_odd_sizes_and_tiny_rates():
    x = tf.ones((3, 5, 7))  # 105 elements: an odd count of 16-bit halves
    seed = keras.random.SeedGenerator(4)
    drop = tf.function(lambda t, rate: threefry_dropout(t, rate, seed), jit_compile=True)
    y = drop(x, 0.5).numpy()
    assert y.shape == (3, 5, 7) and set(np.unique(y).tolist()) <= {0.0, 2.0} and 0 < (y == 0).sum() < y.size
    np.testing.assert_array_equal(drop(x, 1e-6).numpy(), x.numpy())  # below half a level: nothing dropped


def test_outside_xla_it_is_keras_dropout_bit_for_bit():
    x = np.random.default_rng(1).normal(size=(6, 40)).astype("float32")
    ours, theirs = Dropout(0.3, seed=9), keras.layers.Dropout(0.3, seed=9)
    for _ in range(2):  # and both generators advance alike
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours(x, training=True)),
                                      keras.ops.convert_to_numpy(theirs(x, training=True)))
    graph = tf.function(lambda t, layer: layer(t, training=True))  # traced, not compiled by XLA
    np.testing.assert_array_equal(graph(x, ours).numpy(), graph(x, theirs).numpy())


def test_the_switch_changes_every_dropout_of_a_model_and_it_still_saves(tmp_path):
    model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32, dropout=0.1,
                        attention_dropout=0.1, max_length=8)
    ids = np.ones((2, 5), "int32")
    before = keras.ops.convert_to_numpy(model((ids, ids)))
    # Embeddings, the encoder's residual and attention dropouts, the decoder's residual,
    # self- and cross-attention dropouts.
    assert use_cpu_dropout(model) == 6
    assert not [layer for layer in model._flatten_layers() if type(layer) is keras.layers.Dropout]
    path = os.path.join(str(tmp_path), "m.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    # A Transformer rebuilds its layers from its config when loaded: Keras' dropout again, until switched.
    assert sum(type(layer) is keras.layers.Dropout for layer in reloaded._flatten_layers()) == 6
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded((ids, ids))), before, atol=1e-6)


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
    y = _xla(Dropout(0.5, noise_shape=(4, 1), seed=1))(x).numpy()
    assert all(len(set(row.tolist())) == 1 for row in y)  # one decision per row
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(Dropout(1.0)(x, training=True)), 0 * x)
