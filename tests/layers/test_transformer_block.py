"""What both Transformer blocks check of their arguments and calls: each refusal names what it received."""

import re

import keras
import numpy as np
import pytest

from keras_attention.layers import TransformerDecoder, TransformerEncoder
from tests.layers.test_transformer_blocks import D, FF, HEADS, _np, _randn

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too


@pytest.mark.parametrize("cls", [TransformerEncoder, TransformerDecoder])
def test_bad_arguments(cls):
    for kwargs, text in [
        ({"num_heads": 0, "intermediate_dim": 8}, "num_heads=0"),
        ({"num_heads": 2, "intermediate_dim": -8}, "intermediate_dim=-8"),
        ({"num_heads": 2, "intermediate_dim": 8, "dropout": -0.1}, "dropout=-0.1"),
        ({"num_heads": 2, "intermediate_dim": 8, "layer_norm_epsilon": 0}, "layer_norm_epsilon=0"),
    ]:
        with pytest.raises(ValueError, match=text):
            cls(**kwargs)
    with pytest.raises(ValueError, match="num_heads=3"):
        cls(num_heads=3, intermediate_dim=8)(_randn(2, 4, D))
    with pytest.raises(ValueError, match=r"shape=\(2, 16\)"):
        cls(num_heads=2, intermediate_dim=8)(_randn(2, D))


@pytest.mark.parametrize("cls", [TransformerEncoder, TransformerDecoder])
def test_positional_arguments_are_refused_as_keras_hub_orders_them_the_other_way(cls):
    message = r"num_heads, intermediate_dim as keywords.*Received positional arguments: \(8, 4\)"
    with pytest.raises(TypeError, match=message):
        cls(8, 4)


@pytest.mark.parametrize("call, name, shape", [
    (lambda: TransformerEncoder(num_heads=2, intermediate_dim=8)(_randn(2, 5, D), padding_mask=np.ones((2, 6), bool)),
     "padding_mask", (2, 6)),
    (lambda: TransformerEncoder(num_heads=2, intermediate_dim=8)(_randn(2, 5, D),
                                                                 attention_mask=np.ones((2, 5, 4), bool)),
     "attention_mask", (2, 5, 4)),
    (lambda: TransformerDecoder(num_heads=2, intermediate_dim=8)(
        _randn(2, 5, D), _randn(2, 7, D), encoder_padding_mask=np.ones((2, 5), bool)), "encoder_padding_mask", (2, 5)),
    (lambda: TransformerDecoder(num_heads=2, intermediate_dim=8)(
        _randn(2, 5, D), _randn(2, 7, D), decoder_padding_mask=np.ones((3, 5), bool)), "decoder_padding_mask", (3, 5)),
    (lambda: TransformerDecoder(num_heads=2, intermediate_dim=8)(
        _randn(2, 5, D), decoder_attention_mask=np.ones((2, 5, 7), bool)), "decoder_attention_mask", (2, 5, 7)),
])
def test_a_mask_of_the_wrong_shape_is_named_with_its_shape(call, name, shape):
    message = re.escape(f"`{name}` must have shape") + ".*" + re.escape(f"{name}.shape={shape}")
    with pytest.raises(ValueError, match=message):
        call()


def test_decoder_must_be_called_as_built():
    decoder = TransformerDecoder(num_heads=2, intermediate_dim=FF)
    decoder(_randn(2, 3, D), _randn(2, 4, D))
    with pytest.raises(ValueError, match="cross-attention"):
        decoder(_randn(2, 3, D))


def test_the_encoder_width_need_not_divide_into_heads():
    # Cross-attention projects the encoder output to the decoder's head size: any encoder width will do;
    # the decoder's own width still divides into heads.
    decoder = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF)
    y, scores = decoder(_randn(2, 3, D), _randn(2, 5, 13), return_attention_scores=True)
    assert tuple(y.shape) == (2, 3, D) and tuple(scores.shape) == (2, HEADS, 3, 5)
    with pytest.raises(ValueError, match=r"decoder_sequence.shape\[-1\]=13, num_heads=4"):
        TransformerDecoder(num_heads=HEADS, intermediate_dim=FF)(_randn(2, 3, 13), _randn(2, 5, D))


def test_a_decoder_only_block_refuses_to_return_cross_attention_weights():
    # In a functional model (the spec) and when called: the weights do not exist, say so at once.
    message = "decoder-only block has none: use `return_self_attention_scores=True`"
    with pytest.raises(ValueError, match=re.escape(message)):
        TransformerDecoder(num_heads=2, intermediate_dim=FF)(keras.Input((None, D)), return_attention_scores=True)
    with pytest.raises(ValueError, match=re.escape(message)):
        TransformerDecoder(num_heads=2, intermediate_dim=FF)(_randn(2, 3, D), return_attention_scores=True)


@pytest.mark.parametrize("block", [TransformerEncoder, TransformerDecoder])
def test_attention_kernel_initializer_reaches_the_attention_kernels_only(block):
    layer = block(num_heads=HEADS, intermediate_dim=FF, kernel_initializer="ones",
                  attention_kernel_initializer=keras.initializers.Constant(0.5))
    x = _randn(2, 5, D)
    layer(x) if block is TransformerEncoder else layer(x, x)
    for w in layer.weights:
        if w.path.endswith("kernel"):
            expected = 0.5 if "attention" in w.path.split("/")[-3] else 1.0
            np.testing.assert_array_equal(_np(w), np.full(w.shape, expected, "float32"), err_msg=w.path)
    again = block.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
    assert block(num_heads=HEADS, intermediate_dim=FF).get_config()["attention_kernel_initializer"] is None


def test_a_keras_hub_cache_is_refused_naming_the_argument():
    decoder = TransformerDecoder(num_heads=2, intermediate_dim=8)
    with pytest.raises(ValueError, match=r"`self_attention_cache` must be a pair.*keras-hub's single"):
        decoder(_randn(2, 1, D), self_attention_cache=np.zeros((2, 2, 6, 2, 8), "float32"),
                self_attention_cache_update_index=0)


@pytest.mark.parametrize("cls", [TransformerEncoder, TransformerDecoder])
def test_a_missing_argument_is_named_as_python_names_it(cls):
    message = rf"{cls.__name__}\(\) missing required keyword argument\(s\): 'intermediate_dim'"
    with pytest.raises(TypeError, match=message):
        cls(num_heads=4)
