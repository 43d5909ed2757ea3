"""Checks every translation model must pass; used by the per-model test files."""

import gc
import os
import warnings

import keras
import numpy as np
import pytest

from keras import ops

from keras_attention.training import MaskedSparseCrossEntropy, MaskedTokenAccuracy


def also_under_jax(values, chosen):
    """`values` for `parametrize`, those at the indices `chosen` marked `jax_pass`: under JAX the model tests
    check what can differ there (its training step, its decoding steps) on the model's own code paths, the
    layers' options being covered by the layers' tests, which run under JAX."""
    return [pytest.param(v, marks=pytest.mark.jax_pass) if i in chosen else v for i, v in enumerate(values)]


def toy_batch(batch=8, source_len=7, target_len=6, vocab=20, seed=0):
    """Random (source, target_in, target_out) with ragged lengths and 0-padding."""
    rng = np.random.default_rng(seed)
    source = rng.integers(3, vocab, size=(batch, source_len)).astype("int32")
    target = rng.integers(3, vocab, size=(batch, target_len + 1)).astype("int32")
    target[:, 0] = 1  # [START]
    for i in range(batch):
        source[i, rng.integers(2, source_len + 1) :] = 0
        end = rng.integers(3, target_len + 2)
        target[i, end - 1] = 2  # [END]
        target[i, end:] = 0
    return source, target[:, :-1], target[:, 1:]


class _StopWhenFit(keras.callbacks.Callback):
    """Ends `fit` after the first epoch whose mean loss is under `threshold` with every token right."""

    def __init__(self, threshold):
        super().__init__()
        self.threshold = threshold

    def on_epoch_end(self, epoch, logs=None):
        if logs["loss"] < self.threshold and logs["token_accuracy"] == 1.0:
            self.model.stop_training = True


def check_fits_to_near_zero_loss(model, epochs=150, learning_rate=1e-2, threshold=0.05, steps_per_epoch=10):
    """At most `epochs` steps on one batch; it must reach a loss under `threshold` and every token right
    (judged on the mean of `steps_per_epoch` steps, and the fit stops there)."""
    source, target_in, target_out = toy_batch()
    if keras.backend.backend() == "tensorflow":  # built: the optimizer is then built before the step is traced
        model((source[:1], target_in[:1]))  # (JAX's trainer builds it before tracing; an eager call costs there)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=MaskedSparseCrossEntropy(),
        metrics=[MaskedTokenAccuracy()],
    )
    tile = lambda a: np.tile(a, (steps_per_epoch, 1))  # noqa: E731  (the same batch, steps_per_epoch times)
    history = model.fit(
        (tile(source), tile(target_in)), tile(target_out), batch_size=len(source), shuffle=False,
        epochs=epochs // steps_per_epoch, verbose=0, callbacks=[_StopWhenFit(threshold)],
    )
    assert history.history["loss"][-1] < threshold, history.history["loss"][-5:]
    assert history.history["token_accuracy"][-1] == 1.0


def check_padding_does_not_change_loss(model):
    """Extra padding columns change neither the loss nor the real positions' logits."""
    source, target_in, target_out = toy_batch()
    loss = MaskedSparseCrossEntropy(label_smoothing=0.1)
    logits = model((source, target_in))
    padded_source = np.pad(source, ((0, 0), (0, 3)))
    padded_in, padded_out = np.pad(target_in, ((0, 0), (0, 4))), np.pad(target_out, ((0, 0), (0, 4)))
    padded_logits = model((padded_source, padded_in))
    real = target_out != 0
    np.testing.assert_allclose(
        ops.convert_to_numpy(padded_logits)[:, : target_in.shape[1]][real],
        ops.convert_to_numpy(logits)[real],
        atol=1e-4,
    )
    np.testing.assert_allclose(
        float(loss(padded_out, padded_logits)), float(loss(target_out, logits)), rtol=1e-5
    )


def check_save_and_reload(model, tmp_path):
    source, target_in, _ = toy_batch()
    expected = ops.convert_to_numpy(model((source, target_in)))
    path = os.path.join(str(tmp_path), "model.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(ops.convert_to_numpy(reloaded((source, target_in))), expected, atol=1e-5)
    assert reloaded.get_config() == model.get_config()


def check_decode_steps_match_full_pass(model, max_length=6):
    """Feeding the target one token at a time reproduces the teacher-forced logits."""
    source, target_in, target_out = toy_batch()
    full = ops.convert_to_numpy(model((source, target_in)))
    state = model.init_decoding_state(source, max_length)
    steps = []
    for i in range(target_in.shape[1]):
        logits, state, _ = model.decode_step(state, target_in[:, i], i)
        steps.append(ops.convert_to_numpy(logits))
    real = target_out != 0
    np.testing.assert_allclose(np.stack(steps, 1)[real], full[real], atol=1e-4)


def quantize(model, mode="int8"):
    """`model.quantize(mode)` as the tests run it: without Keras' warning for each layer it leaves as it is, and
    without the full garbage collection Keras runs for each weight it replaces (34 for a 2-layer Transformer, up
    to a second each in a test process' heap). The quantized model is the same."""
    collect = gc.collect
    gc.collect = lambda *args: 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.quantize(mode)
    finally:
        gc.collect = collect
    return model
