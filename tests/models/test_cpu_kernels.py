"""The CPU switches. `CPUDropout`: Keras' semantics (keep with 1 - rate, scale to keep the mean), checked
statistically. `use_cpu_rows`: Keras' layers' values and gradients, compared with Keras' layers.

The ThreeFry path runs only inside XLA compilations on a CPU, so most checks call
the layer in a `tf.function(jit_compile=True)`; outside one it is Keras' dropout.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.models.cpu_kernels import CPUDropout as Dropout
from keras_attention.models.cpu_kernels import threefry_dropout, use_cpu_dropout, use_cpu_rows
from keras_attention.models import Seq2SeqRNN, Transformer
from keras_attention.training import MaskedSparseCrossEntropy

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


def test_the_switch_changes_every_dropout_of_a_model_and_it_still_saves_as_keras(tmp_path):
    model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32, dropout=0.1,
                        attention_dropout=0.1, max_length=8)
    ids = np.ones((2, 5), "int32")
    before = keras.ops.convert_to_numpy(model((ids, ids)))
    # Embeddings, the encoder's residual and attention dropouts, the decoder's residual,
    # self- and cross-attention dropouts.
    assert use_cpu_dropout(model) == 6
    dropouts = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dropout)]
    assert len(dropouts) == 6 and all(type(layer) is keras.layers.Dropout for layer in dropouts)  # class kept
    # Each switched layer draws CPUDropout's masks under XLA: the same seed, the same mask.
    x = np.ones(SHAPE, "float32")
    switched = keras.layers.Dropout(0.2, seed=7)
    assert use_cpu_dropout(switched) == 1
    np.testing.assert_array_equal(_xla(switched)(x).numpy(), _xla(Dropout(0.2, seed=7))(x).numpy())
    assert not np.array_equal(_xla(switched)(x).numpy(), _xla(keras.layers.Dropout(0.2, seed=7))(x).numpy())
    path = os.path.join(str(tmp_path), "m.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
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


# cpu_rows: the layers on rows compute what Keras' layers compute ------------------------------


def _twin_pairs():
    """(name, Keras' layer, the same layer with the same weights switched to rows, an input)."""
    shapes = {"dense": (3, 5, 8), "norm": (3, 5, 8), "query": (3, 5, 8), "output": (3, 5, 2, 4), "other": (3, 5, 8)}
    pairs = {
        "dense": lambda: keras.layers.Dense(6, activation="relu"),
        "norm": lambda: keras.layers.LayerNormalization(),
        "query": lambda: keras.layers.EinsumDense("abc,cde->abde", (None, 2, 4), bias_axes="de"),
        "output": lambda: keras.layers.EinsumDense("abcd,cde->abe", (None, 8), bias_axes="e"),
        "other": lambda: keras.layers.EinsumDense("abc,cd->abd", (None, 4), bias_axes="d", activation="tanh"),
    }
    rng = np.random.default_rng(0)
    for name, make in pairs.items():
        keras_layer, twin = make(), make()
        assert use_cpu_rows(twin) == 1
        keras_layer.build(shapes[name])
        twin.build(shapes[name])
        weights = [rng.normal(size=w.shape).astype("float32") for w in keras_layer.weights]
        keras_layer.set_weights(weights)
        twin.set_weights(weights)
        yield name, keras_layer, twin, rng.normal(size=shapes[name]).astype("float32")


def _xla_value_and_gradients(layer, x):
    @tf.function(jit_compile=True)
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * tf.cos(y))  # not linear in y: the gradients reach every weight unevenly
        return [y] + tape.gradient(loss, [x] + [w.value for w in layer.trainable_weights])

    return [t.numpy() for t in run(tf.constant(x))]


@pytest.mark.parametrize("name", ["dense", "norm", "query", "output", "other"])
def test_rows_twins_give_keras_values_and_gradients_under_xla(name, monkeypatch):
    import keras_attention.models.cpu_kernels as cpu_kernels

    reshaped = []
    rows = cpu_kernels._rows
    monkeypatch.setattr(cpu_kernels, "_rows", lambda x: reshaped.append(x.shape) or rows(x))
    keras_layer, twin, x = next((k, t, x) for n, k, t, x in _twin_pairs() if n == name)
    expected, got = _xla_value_and_gradients(keras_layer, x), _xla_value_and_gradients(twin, x)
    assert len(got) == len(expected) == 2 + len(keras_layer.trainable_weights)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    # The rows path ran for the per-token layers and the two attention projections, not for other equations.
    assert bool(reshaped) == (name != "other")


def test_rows_twins_are_keras_layers_outside_xla():
    for _, keras_layer, twin, x in _twin_pairs():
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(twin(x)), keras.ops.convert_to_numpy(keras_layer(x)))


def test_the_rows_switch_keeps_a_transformer_training_step_and_saving(tmp_path):
    def model():  # without dropout: two models' dropout layers draw different masks, switched or not
        keras.utils.set_random_seed(3)
        return Transformer(40, 40, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32, max_length=8,
                           dropout=0.0)

    ids = np.random.default_rng(2).integers(1, 40, size=(4, 6)).astype("int32")
    plain, switched = model(), model()
    plain((ids, ids))
    switched((ids, ids))
    switched.set_weights(plain.get_weights())
    # Encoder: 4 attention projections, 2 FFN dense layers, 2 norms; decoder: 8 projections, 2 dense,
    # 3 norms (the output layer is the tied embedding, not a Dense).
    assert use_cpu_rows(switched) == 21
    losses = []
    for m in (plain, switched):
        m.compile(optimizer=keras.optimizers.SGD(0.5), loss=MaskedSparseCrossEntropy(), jit_compile=True)
        history = m.fit((ids, ids), ids, epochs=3, batch_size=4, verbose=0, shuffle=False)
        losses.append(history.history["loss"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)
    assert losses[0][-1] < losses[0][0]
    for a, b in zip(plain.get_weights(), switched.get_weights()):
        np.testing.assert_allclose(b, a, atol=1e-4)
    path = os.path.join(str(tmp_path), "m.keras")
    switched.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(reloaded((ids, ids))),
                               keras.ops.convert_to_numpy(switched((ids, ids))), atol=1e-5)


def test_a_switched_model_saves_as_keras_layers_and_its_weights_load_into_an_unswitched_one(tmp_path):
    # Seq2SeqRNN keeps Dense and Dropout layers in lists, which Keras' files address by class name: the
    # switches must not change the class, or a model saved with them would not load without them.
    def model():
        keras.utils.set_random_seed(4)
        return Seq2SeqRNN(30, 30, embedding_dim=8, units=8, attention="luong")

    ids = np.random.default_rng(3).integers(1, 30, size=(2, 5)).astype("int32")
    switched, plain = model(), model()
    switched((ids, ids))
    plain((ids, ids))
    assert use_cpu_rows(switched) > 0 and use_cpu_dropout(switched) > 0
    assert {type(layer) for layer in switched._flatten_layers()} == {type(layer) for layer in plain._flatten_layers()}
    path = os.path.join(str(tmp_path), "m.weights.h5")
    switched.save_weights(path)
    plain.load_weights(path)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(plain((ids, ids))),
                                  keras.ops.convert_to_numpy(switched((ids, ids))))
    switched.save(os.path.join(str(tmp_path), "m.keras"))
    reloaded = keras.models.load_model(os.path.join(str(tmp_path), "m.keras"))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(reloaded((ids, ids))),
                                  keras.ops.convert_to_numpy(switched((ids, ids))))
