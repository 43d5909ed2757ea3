"""Our models' `compile` builds the optimizer of a built model: the training step is traced once, and trains
exactly as Keras' own order (optimizer built while the step is traced) does."""

import keras
import numpy as np
import pytest

from keras_attention.models import DecomposableAttention, Seq2SeqRNN, Transformer
from keras_attention.training import MaskedSparseCrossEntropy, optimizers
from tests.models import model_checks


def _transformer():
    return Transformer(20, 20, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)


def _trained(compile_, monkeypatch=None):
    """The weights and losses after 3 steps on the toy batch, and how often the Python training step ran."""
    keras.utils.set_random_seed(3)
    model = _transformer()
    source, target_in, target_out = model_checks.toy_batch()
    model((source[:1], target_in[:1]))  # built before compile, as the recipe and the tutorials build it
    compile_(model, optimizer=optimizers.Adam(1e-2, clipnorm=1.0), loss=MaskedSparseCrossEntropy(),
             jit_compile=False)
    traces = []
    if monkeypatch is not None:
        step = type(model).train_step
        monkeypatch.setattr(type(model), "train_step", lambda self, data: traces.append(1) or step(self, data))
    history = model.fit((source, target_in), target_out, batch_size=8, epochs=3, verbose=0, shuffle=False)
    return model.get_weights(), history.history["loss"], len(traces)


def test_the_step_is_traced_once_and_trains_as_keras_order_does(monkeypatch):
    weights, losses, traces = _trained(Transformer.compile, monkeypatch)
    assert traces == 1  # Keras' order traces the Python step twice (a TensorFlow conditional per new variable)
    keras_weights, keras_losses, _ = _trained(keras.Model.compile)  # the optimizer left to Keras
    np.testing.assert_allclose(losses, keras_losses, rtol=1e-6)
    for ours, theirs in zip(weights, keras_weights):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)


SMALL = {
    Transformer: lambda: _transformer(),
    Seq2SeqRNN: lambda: Seq2SeqRNN(20, 20, embedding_dim=8, units=16, attention="bahdanau"),
    DecomposableAttention: lambda: DecomposableAttention(20, 3, embedding_dim=6, hidden_dim=5),
}


@pytest.mark.parametrize("model_class", SMALL, ids=lambda c: c.__name__)
def test_every_model_builds_its_optimizer_at_compile_once_built(model_class):
    model = SMALL[model_class]()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    assert not model.optimizer.built  # a model not yet built is left to Keras
    source, target_in, _ = model_checks.toy_batch()
    model((source, target_in) if model_class is not DecomposableAttention else (source, source))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    # Adam's first and second moments, one each a trainable weight (and its step count, its learning rate).
    assert model.optimizer.built and len(model.optimizer.variables) >= 2 * len(model.trainable_variables) > 0
