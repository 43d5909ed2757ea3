"""TransformerEncoder and TransformerDecoder against keras-hub, NumPy-free properties."""

import keras
import keras_hub
import numpy as np
import pytest

from keras import ops

from keras_attention.layers import TransformerDecoder, TransformerEncoder
from tests.test_case import fewer_under_jax, gradients, one_shape_under_jax, run_layer_test

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

rng = np.random.default_rng(0)
D, HEADS, FF = 16, 4, 32


def _randn(*shape):
    return rng.normal(size=shape).astype("float32")


def _padding(batch, length):
    mask = np.ones((batch, length), bool)
    mask[1, length // 2 :] = False
    if batch > 2:
        mask[2, 2:] = False
    return mask


def _np(x):
    return ops.convert_to_numpy(x)


def _copy(src, dst):
    dst.set_weights(src.get_weights())


def _sublayer_pairs(ours, hub, decoder=False):
    """(our sublayer, keras-hub's) pairs of a block, whose weights line up one to one."""
    pairs = [
        (ours.self_attention, hub._self_attention_layer),
        (ours.self_attention_norm, hub._self_attention_layer_norm),
        (ours.feedforward_intermediate, hub._feedforward_intermediate_dense),
        (ours.feedforward_output, hub._feedforward_output_dense),
        (ours.feedforward_norm, hub._feedforward_layer_norm),
    ]
    if decoder:
        pairs += [(ours.cross_attention, hub._cross_attention_layer),
                  (ours.cross_attention_norm, hub._cross_attention_layer_norm)]
    return pairs


def _copy_block(ours, hub, decoder=False):
    for mine, theirs in _sublayer_pairs(ours, hub, decoder):
        _copy(mine, theirs)


# Harness ----------------------------------------------------------------------


@pytest.mark.parametrize("normalize_first", fewer_under_jax([False, True], [False]))
def test_encoder_harness(tmp_path, normalize_first):
    run_layer_test(
        TransformerEncoder,
        {
            "num_heads": HEADS,
            "intermediate_dim": FF,
            "dropout": 0.1,
            "attention_dropout": 0.1,
            "activation": "gelu",
            "normalize_first": normalize_first,
        },
        {"inputs": _randn(3, 6, D), "padding_mask": _padding(3, 6)},
        expected_output_shape=(3, 6, D),
        tmp_path=tmp_path,
    )


def test_decoder_harness(tmp_path):
    run_layer_test(
        TransformerDecoder,
        {"num_heads": HEADS, "intermediate_dim": FF, "dropout": 0.1},
        {
            "decoder_sequence": _randn(3, 5, D),
            "encoder_sequence": _randn(3, 7, D),
            "decoder_padding_mask": _padding(3, 5),
            "encoder_padding_mask": _padding(3, 7),
        },
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=((3, 5, D), (3, HEADS, 5, 7)),
        tmp_path=tmp_path,
    )


def test_decoder_harness_with_a_cache_and_every_output(tmp_path):
    """Step 3 of a cached decoding in a functional model: both weights and the updated cache come out."""
    run_layer_test(
        TransformerDecoder,
        {"num_heads": HEADS, "intermediate_dim": FF},
        {
            "decoder_sequence": _randn(3, 1, D),
            "encoder_sequence": _randn(3, 7, D),
            "encoder_padding_mask": _padding(3, 7),
            "self_attention_cache": (_randn(3, HEADS, 6, D // HEADS), _randn(3, HEADS, 6, D // HEADS)),
        },
        call_kwargs={"self_attention_cache_update_index": 3, "return_attention_scores": True,
                     "return_self_attention_scores": True},
        expected_output_shape=((3, 1, D), (3, HEADS, 1, 7), (3, HEADS, 1, 6),
                               (3, HEADS, 6, D // HEADS), (3, HEADS, 6, D // HEADS)),
        run_fit=False,  # the cache write is not differentiable on TensorFlow; the other harness runs fit
        tmp_path=tmp_path,
    )


def test_decoder_only_harness(tmp_path):
    run_layer_test(
        TransformerDecoder,
        {"num_heads": 2, "intermediate_dim": FF, "normalize_first": True},
        {"decoder_sequence": _randn(2, 5, D)},
        expected_output_shape=(2, 5, D),
        tmp_path=tmp_path,
    )


# Parity with keras-hub ----------------------------------------------------------


@pytest.mark.parametrize("normalize_first", fewer_under_jax([False, True], [True]))
def test_encoder_matches_keras_hub(normalize_first):
    x, mask = _randn(3, 6, D), _padding(3, 6)
    ours = TransformerEncoder(num_heads=HEADS, intermediate_dim=FF, normalize_first=normalize_first)
    hub = keras_hub.layers.TransformerEncoder(FF, HEADS, normalize_first=normalize_first)
    ours(x)
    hub(x)
    _copy_block(ours, hub)
    np.testing.assert_allclose(_np(ours(x)), _np(hub(x)), atol=1e-5)
    np.testing.assert_allclose(
        _np(ours(x, padding_mask=mask)), _np(hub(x, padding_mask=mask)), atol=1e-5
    )


@pytest.mark.parametrize("normalize_first", fewer_under_jax([False, True], [False]))
def test_decoder_matches_keras_hub(normalize_first):
    y, x = _randn(3, 5, D), _randn(3, 7, D)
    y_mask, x_mask = _padding(3, 5), _padding(3, 7)
    ours = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF, normalize_first=normalize_first)
    hub = keras_hub.layers.TransformerDecoder(FF, HEADS, normalize_first=normalize_first)
    ours(y, x)
    hub(y, x)
    _copy_block(ours, hub, decoder=True)
    np.testing.assert_allclose(_np(ours(y, x)), _np(hub(y, x)), atol=1e-5)
    a = ours(y, x, decoder_padding_mask=y_mask, encoder_padding_mask=x_mask)
    b = hub(y, x, decoder_padding_mask=y_mask, encoder_padding_mask=x_mask)
    np.testing.assert_allclose(_np(a), _np(b), atol=1e-5)
    attention_mask = rng.random((3, 5, 5)) < 0.5
    attention_mask[:, np.arange(5), np.arange(5)] = True  # every position sees itself
    a = ours(y, x, decoder_attention_mask=attention_mask, encoder_padding_mask=x_mask)
    b = hub(y, x, decoder_attention_mask=attention_mask, encoder_padding_mask=x_mask)
    np.testing.assert_allclose(_np(a), _np(b), atol=1e-5)
    # The mask is ANDed with the causal mask: all-True changes nothing.
    everything = ours(y, x, decoder_attention_mask=np.ones((3, 5, 5), bool))
    np.testing.assert_allclose(_np(everything), _np(ours(y, x)), atol=1e-6)


@pytest.mark.parametrize("decoder", fewer_under_jax([False, True], [True]))
@pytest.mark.parametrize("normalize_first", fewer_under_jax([False, True], [True]))
def test_compiled_gradients_match_keras_hub(decoder, normalize_first):
    """Under XLA, the gradients of the input and of every weight (biases, norm scales and offsets) equal keras-hub's."""
    y, x = _randn(3, 5, D), _randn(3, 7, D)
    y_mask, x_mask = _padding(3, 5), _padding(3, 7)
    upstream = _randn(3, 5, D)
    if decoder:
        ours = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF, normalize_first=normalize_first)
        hub = keras_hub.layers.TransformerDecoder(FF, HEADS, normalize_first=normalize_first)
        ours(y, x)
        hub(y, x)
        call = lambda layer, y: layer(  # noqa: E731
            y, x, decoder_padding_mask=y_mask, encoder_padding_mask=x_mask)
    else:
        ours = TransformerEncoder(num_heads=HEADS, intermediate_dim=FF, normalize_first=normalize_first)
        hub = keras_hub.layers.TransformerEncoder(FF, HEADS, normalize_first=normalize_first)
        ours(y)
        hub(y)
        call = lambda layer, y: layer(y, padding_mask=y_mask)  # noqa: E731
    _copy_block(ours, hub, decoder)
    pairs = _sublayer_pairs(ours, hub, decoder)

    def block_gradients(layer, weights):
        return gradients(lambda y: ops.sum(call(layer, y) * upstream), [y], weights, jit=True)

    ours_grads = block_gradients(ours, [w for mine, _ in pairs for w in mine.trainable_weights])
    hub_grads = block_gradients(hub, [w for _, theirs in pairs for w in theirs.trainable_weights])
    assert len(ours_grads) == len(hub_grads) > 1 + 5 * 2
    for a, b in zip(ours_grads, hub_grads):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# Properties ---------------------------------------------------------------------


def test_decoder_causality_property():
    for trial in range(4):
        length = one_shape_under_jax(int(rng.integers(3, 9)), 8)
        decoder = TransformerDecoder(num_heads=2, intermediate_dim=FF)
        y, x = _randn(2, length, D), _randn(2, 4, D)
        t = int(rng.integers(0, length - 1))
        changed = y.copy()
        changed[:, t + 1 :] = _randn(2, length - t - 1, D)
        a, b = _np(decoder(y, x)), _np(decoder(changed, x))
        np.testing.assert_allclose(a[:, : t + 1], b[:, : t + 1], atol=1e-5)
        assert not np.allclose(a[:, t + 1 :], b[:, t + 1 :])


@pytest.mark.parametrize("normalize_first", fewer_under_jax([False, True], [True]))
def test_cached_decoding_equals_full_pass(normalize_first):
    y, x = _randn(2, 6, D), _randn(2, 7, D)
    x_mask = _padding(2, 7)
    decoder = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF, normalize_first=normalize_first)
    full, full_scores = decoder(y, x, encoder_padding_mask=x_mask, return_attention_scores=True)
    cache = decoder.init_self_attention_cache(2, 6)
    cross = decoder.compute_cross_attention_cache(x)
    outs, scores = [], []
    for i in range(6):
        out, s, cache = decoder(
            y[:, i : i + 1],
            x,
            encoder_padding_mask=x_mask,
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
            cross_attention_cache=cross,
            return_attention_scores=True,
        )
        outs.append(_np(out))
        scores.append(_np(s))
    np.testing.assert_allclose(np.concatenate(outs, 1), _np(full), atol=1e-5)
    np.testing.assert_allclose(np.concatenate(scores, 2), _np(full_scores), atol=1e-5)


def test_self_attention_scores_are_causal_and_match_the_cache_steps():
    y, x = _randn(2, 5, D), _randn(2, 7, D)
    decoder = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF)
    out, cross, own = decoder(y, x, return_attention_scores=True, return_self_attention_scores=True)
    own = _np(own)
    assert own.shape == (2, HEADS, 5, 5) and tuple(cross.shape) == (2, HEADS, 5, 7)
    assert np.all(np.triu(own, k=1) == 0)  # no position sees a later one
    np.testing.assert_allclose(own.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(_np(out), _np(decoder(y, x)), atol=1e-6)  # asking changes nothing
    # Step by step with a cache: each step's row over the cache equals the full pass' row.
    cache = decoder.init_self_attention_cache(2, 5)
    for i in range(5):
        _, step, cache = decoder(y[:, i : i + 1], x, self_attention_cache=cache,
                                 self_attention_cache_update_index=i, return_self_attention_scores=True)
        np.testing.assert_allclose(_np(step)[:, :, 0], own[:, :, i], atol=1e-5)
    # Symbolic shapes, as a functional model sees them.
    spec = decoder.compute_output_spec(
        keras.KerasTensor((None, 5, D)), keras.KerasTensor((None, 7, D)),
        return_attention_scores=True, return_self_attention_scores=True,
    )
    assert [tuple(s.shape) for s in spec] == [(None, 5, D), (None, HEADS, 5, 7), (None, HEADS, 5, 5)]


def test_padded_encoder_positions_get_no_cross_attention():
    y, x, x_mask = _randn(3, 5, D), _randn(3, 7, D), _padding(3, 7)
    decoder = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF)
    _, scores = decoder(y, x, encoder_padding_mask=x_mask, return_attention_scores=True)
    scores = _np(scores)
    assert np.all(scores[np.broadcast_to(~x_mask[:, None, None, :], scores.shape)] == 0)
    # Changing what sits in the padding changes nothing at all.
    noisy = x.copy()
    noisy[~x_mask] = _randn(int((~x_mask).sum()), D)
    np.testing.assert_allclose(
        _np(decoder(y, noisy, encoder_padding_mask=x_mask)),
        _np(decoder(y, x, encoder_padding_mask=x_mask)),
        atol=1e-6,
    )


def test_encoder_attention_scores_and_padding():
    x, mask = _randn(3, 6, D), _padding(3, 6)
    encoder = TransformerEncoder(num_heads=HEADS, intermediate_dim=FF)
    out, scores = encoder(x, padding_mask=mask, return_attention_scores=True)
    assert tuple(scores.shape) == (3, HEADS, 6, 6)
    noisy = x.copy()
    noisy[~mask] = 100.0
    kept = _np(encoder(noisy, padding_mask=mask))[mask]
    np.testing.assert_allclose(kept, _np(out)[mask], atol=1e-5)


def test_stacked_blocks_keep_the_keras_mask_of_a_tensor_they_share():
    # One encoder output read by two decoder blocks, one embedding read by two encoders: padding the
    # source must change no real position, so every block must see the Keras mask (attention layers
    # clear the masks of their inputs while they run).
    from keras_attention.layers import PositionalEmbedding

    source, target = keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")
    embed = PositionalEmbedding(vocab_size=20, d_model=D, mask_zero=True)
    embedded = embed(source)
    memory = TransformerEncoder(num_heads=HEADS, intermediate_dim=FF)(embedded)
    beside = TransformerEncoder(num_heads=HEADS, intermediate_dim=FF)(embedded)
    y = embed(target)
    for _ in range(2):
        y = TransformerDecoder(num_heads=HEADS, intermediate_dim=FF)(y, memory)
    model = keras.Model([source, target], [y, beside])
    tokens = np.array([[1, 2]], "int32")
    y_short, beside_short = model([np.array([[3, 4, 5]], "int32"), tokens])
    y_padded, beside_padded = model([np.array([[3, 4, 5, 0, 0]], "int32"), tokens])
    np.testing.assert_allclose(_np(y_padded), _np(y_short), atol=1e-5)
    np.testing.assert_allclose(_np(beside_padded)[:, :3], _np(beside_short), atol=1e-5)
    if keras.backend.backend() == "tensorflow":  # traced, as fit runs it (JAX's compilation: 5 s more here)
        y_graph, _ = model.predict([np.array([[3, 4, 5, 0, 0]], "int32"), tokens], verbose=0)
        np.testing.assert_allclose(y_graph, _np(y_short), atol=1e-5)
