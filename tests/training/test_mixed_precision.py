"""Mixed precision: a Transformer on padded batches trains in float16 like in float32, and in bfloat16.

Softmax, layer norm, the logits and the loss stay in float32 under both
policies (checked on the model's own intermediate results)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.models import Transformer
from keras_attention.training import MaskedSparseCrossEntropy, MaskedTokenAccuracy, optimizers
from keras_attention.training.distribution import set_precision

VOCAB, BATCH, BATCHES, EPOCHS = 24, 16, 25, 4  # 100 steps


def _copy_task():
    """Targets copy the sources; lengths 2..10, padded with 0 to the batch's longest."""
    rng = np.random.default_rng(5)
    pairs = []
    for _ in range(BATCH * BATCHES):
        tokens = rng.integers(3, VOCAB, rng.integers(2, 11)).astype("int32")
        pairs.append((tokens, np.concatenate([[1], tokens]), np.concatenate([tokens, [2]])))

    def generate():
        yield from pairs

    spec = tuple(tf.TensorSpec([None], tf.int32) for _ in range(3))
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec).padded_batch(BATCH)
    ds = ds.map(lambda x, y_in, y_out: ((x, y_in), y_out)).cache()
    return ds.apply(tf.data.experimental.assert_cardinality(BATCHES))


class _BatchLosses(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def _build():
    keras.utils.set_random_seed(11)
    model = Transformer(VOCAB, VOCAB, num_layers=2, d_model=32, num_heads=4, intermediate_dim=64,
                        dropout=0.0, max_length=16)
    model((np.ones((1, 4), "int32"), np.ones((1, 4), "int32")))
    return model


def _initial_weights():
    set_precision("float32")
    return _build().get_weights()


def _train(policy, initial_weights):
    set_precision(policy)
    model = _build()
    model.set_weights(initial_weights)
    model.compile(optimizers.Adam(3e-3, clipnorm=1.0), loss=MaskedSparseCrossEntropy(label_smoothing=0.1),
                  metrics=[MaskedTokenAccuracy()], jit_compile=False)
    record = _BatchLosses()
    history = model.fit(_copy_task(), epochs=EPOCHS, verbose=0, callbacks=[record], shuffle=False)
    set_precision("float32")
    return model, history.history, record.losses


def test_mixed_float16_matches_float32_after_100_steps():
    initial = _initial_weights()  # the same start for both
    _, history_32, losses_32 = _train("float32", initial)
    model_16, history_16, losses_16 = _train("mixed_float16", initial)

    assert isinstance(model_16.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model_16.compute_dtype == "float16" and model_16.variable_dtype == "float32"
    assert len(losses_16) == len(losses_32) == EPOCHS * BATCHES == 100
    assert np.all(np.isfinite(losses_16)), losses_16
    assert history_16["loss"][-1] < 0.8 * history_16["loss"][0]
    assert history_32["loss"][-1] < 0.8 * history_32["loss"][0]  # it learned something
    final_32, final_16 = history_32["loss"][-1], history_16["loss"][-1]
    assert abs(final_16 - final_32) / final_32 < 0.02, (final_16, final_32)


def test_mixed_bfloat16_trains_50_steps_with_finite_decreasing_loss():
    set_precision("mixed_bfloat16")
    model = _build()
    model.compile(optimizers.Adam(3e-3, clipnorm=1.0), loss=MaskedSparseCrossEntropy(), jit_compile=False)
    record = _BatchLosses()
    history = model.fit(_copy_task(), epochs=2, verbose=0, callbacks=[record], shuffle=False)
    set_precision("float32")
    assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.compute_dtype == "bfloat16" and len(record.losses) == 50
    assert np.all(np.isfinite(record.losses)), record.losses
    assert history.history["loss"][-1] < 0.9 * history.history["loss"][0]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_softmax_and_logits_in_float32(policy, monkeypatch):
    """Every softmax of the model (attention weights) gets float32 scores; the logits are float32."""
    seen = []
    softmax = keras.ops.softmax

    def recording_softmax(x, *args, **kwargs):
        seen.append(keras.backend.standardize_dtype(x.dtype))
        return softmax(x, *args, **kwargs)

    monkeypatch.setattr(keras.ops, "softmax", recording_softmax)
    set_precision(policy)
    try:
        model = _build()
        source = np.random.default_rng(0).integers(3, VOCAB, (2, 9)).astype("int32")
        target = np.random.default_rng(1).integers(3, VOCAB, (2, 7)).astype("int32")
        logits, scores = model.decode(target, *model.encode(source), return_attention=True)
    finally:
        set_precision("float32")
    assert scores.dtype == policy[len("mixed_"):] and logits.dtype == "float32"
    assert seen and set(seen) == {"float32"}, seen
