"""Our models build the optimizer of a built model before the training step is traced: the step is traced once,
trains exactly as Keras' own order (optimizer built while the step is traced) does, and `compile` and `.keras`
loading stay Keras' own."""

import keras
import numpy as np
import pytest

from keras_attention.models import DecomposableAttention, Seq2SeqRNN, Transformer
from keras_attention.training import MaskedSparseCrossEntropy, optimizers
from tests.models import model_checks


def _transformer():
    return Transformer(20, 20, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)


def _trained(keras_order=False, monkeypatch=None, epochs=3):
    """The model after `epochs` steps on the toy batch, its losses, and how often the Python training step ran."""
    keras.utils.set_random_seed(3)
    model = _transformer()
    source, target_in, target_out = model_checks.toy_batch()
    model((source[:1], target_in[:1]))  # built before fit, as the recipe and the tutorials build it
    model.compile(optimizer=optimizers.Adam(1e-2, clipnorm=1.0), loss=MaskedSparseCrossEntropy(), jit_compile=False)
    if keras_order:  # Keras' own make_train_function: the optimizer is left to the trace
        model.make_train_function = lambda force=False: keras.Model.make_train_function(model, force)
    traces = []
    if monkeypatch is not None:
        step = Transformer.train_step
        monkeypatch.setattr(Transformer, "train_step", lambda self, data: traces.append(1) or step(self, data))
    history = model.fit((source, target_in), target_out, batch_size=8, epochs=epochs, verbose=0, shuffle=False)
    return model, history.history["loss"], len(traces)


def test_the_step_is_traced_once_and_trains_as_keras_order_does(monkeypatch):
    model, losses, traces = _trained(monkeypatch=monkeypatch)
    assert traces == 1
    monkeypatch.undo()
    keras_model, keras_losses, _ = _trained(keras_order=True, monkeypatch=monkeypatch)
    assert len(keras_model.get_weights()) == len(model.get_weights())
    np.testing.assert_allclose(losses, keras_losses, rtol=1e-6)
    for ours, theirs in zip(model.get_weights(), keras_model.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)


SMALL = {
    Transformer: lambda: _transformer(),
    Seq2SeqRNN: lambda: Seq2SeqRNN(20, 20, embedding_dim=8, units=16, attention="bahdanau"),
    DecomposableAttention: lambda: DecomposableAttention(20, 3, embedding_dim=6, hidden_dim=5),
}


@pytest.mark.parametrize("model_class", SMALL, ids=lambda c: c.__name__)
def test_every_model_builds_its_optimizer_before_the_trace_once_built(model_class):
    model = SMALL[model_class]()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.make_train_function()
    assert not model.optimizer.built  # a model not yet built is left to Keras
    source, target_in, _ = model_checks.toy_batch()
    model((source, target_in) if model_class is not DecomposableAttention else (source, source))
    assert not model.optimizer.built  # compile is Keras' own
    model.make_train_function(force=True)
    # Adam's first and second moments, one each a trainable weight (and its step count, its learning rate).
    assert model.optimizer.built and len(model.optimizer.variables) >= 2 * len(model.trainable_variables) > 0


def test_a_saved_compiled_model_loads_compiled_with_its_optimizer_state(tmp_path):
    model, _, _ = _trained(epochs=1)  # one step
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.compiled and isinstance(loaded.loss, MaskedSparseCrossEntropy)
    assert int(loaded.optimizer.iterations) == 1
    for saved, restored in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(saved), np.asarray(restored))
