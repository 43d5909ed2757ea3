"""Models saved by keras-attention 0.2 load and give the outputs 0.2 computed.

The files in `data/` were written by 0.2.0 (commit 5dbd027), with the script below, together
with the outputs of each model on a padded batch; 0.3 changed `MultiHeadAttention` into a
subclass of Keras' layer (other weight layout) and dropped our `Dropout` for Keras' own.

    from keras_attention.models import Transformer, Seq2SeqRNN
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(0)
    source = rng.integers(1, 20, (2, 6)); source[1, 4:] = 0
    target = rng.integers(1, 20, (2, 5)); target[1, 3:] = 0
    Transformer(20, 20, num_layers=1, d_model=8, num_heads=2, intermediate_dim=16, dropout=0.1, max_length=8)
    Seq2SeqRNN(20, 20, embedding_dim=8, units=8, attention="luong")
"""

import pathlib

import keras
import numpy as np
import pytest

import keras_attention.models  # noqa: F401  (registers the classes)

DATA = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["transformer", "seq2seq_rnn"])
def test_a_model_saved_by_0_2_loads_with_its_weights(name):
    expected = np.load(DATA / "outputs_0.2.npz")
    model = keras.models.load_model(DATA / f"{name}_0.2.keras")
    outputs = model((expected["source"], expected["target"]))
    key = "transformer" if name == "transformer" else "rnn"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs), expected[key], atol=1e-5)
