import os

import keras
import numpy as np
import pytest

from keras import ops

from keras_attention.models import DecomposableAttention

rng = np.random.default_rng(0)
VOCAB = 20


def _np(x):
    return ops.convert_to_numpy(x)


def _ids(batch, length, min_len=1):
    """Random ids in [1, VOCAB) followed by 0-padding; row 0 is unpadded."""
    ids = rng.integers(1, VOCAB, size=(batch, length))
    lengths = rng.integers(min_len, length + 1, size=batch)
    lengths[0] = length
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return ids


def _model(intra_attention=False, **kwargs):
    kwargs = {"embedding_dim": 6, "hidden_dim": 5, "dropout": 0.0, **kwargs}
    model = DecomposableAttention(VOCAB, 3, intra_attention=intra_attention, **kwargs)
    model.build()
    if intra_attention:  # zeros at init would hide the order information
        model.distance_bias.assign(rng.normal(size=21).astype("float32"))
    return model


# NumPy reference -------------------------------------------------------------


def _relu_stack(x, sequential):
    for layer in sequential.layers:
        if isinstance(layer, keras.layers.Dense):
            x = np.maximum(x @ layer.kernel.numpy() + layer.bias.numpy(), 0.0)
    return x


def _softmax(x, valid, axis):
    x = np.where(valid, x, -np.inf)
    x = np.exp(x - x.max(axis, keepdims=True))
    return x / x.sum(axis, keepdims=True)


def _np_embed(model, ids):
    x = model.embedding.embeddings.numpy()[ids] @ model.projection.kernel.numpy()
    if model.intra_attention:
        f = _relu_stack(x, model.intra_feedforward)
        i = np.arange(ids.shape[1])
        bias = model.distance_bias.numpy()[np.clip(i[:, None] - i[None, :], -10, 10) + 10]
        w = _softmax(f @ f.transpose(0, 2, 1) + bias, (ids != 0)[:, None, :], axis=2)
        x = np.concatenate([x, w @ x], -1)
    return x


def _np_attend(model, a, b, mask_a, mask_b):
    """e_ij, both softmaxes (zero at padded pairs), beta and alpha, in NumPy."""
    e = _relu_stack(a, model.attend_feedforward) @ _relu_stack(
        b, model.attend_feedforward
    ).transpose(0, 2, 1)  # (B, L_a, L_b)
    pairs = mask_a[:, :, None] & mask_b[:, None, :]
    to_b = np.where(pairs, _softmax(e, mask_b[:, None, :], axis=2), 0.0)
    to_a = np.where(pairs, _softmax(e, mask_a[:, :, None], axis=1), 0.0)
    beta = to_b @ b  # (B, L_a, d)
    alpha = to_a.transpose(0, 2, 1) @ a  # (B, L_b, d)
    return beta, alpha, to_b, to_a


def _np_logits(model, premise, hypothesis):
    a, b = _np_embed(model, premise), _np_embed(model, hypothesis)
    mask_a, mask_b = premise != 0, hypothesis != 0
    beta, alpha, _, _ = _np_attend(model, a, b, mask_a, mask_b)
    g = model.compare_feedforward
    v1 = (_relu_stack(np.concatenate([a, beta], -1), g) * mask_a[..., None]).sum(1)
    v2 = (_relu_stack(np.concatenate([b, alpha], -1), g) * mask_b[..., None]).sum(1)
    v = _relu_stack(np.concatenate([v1, v2], -1), model.aggregate_feedforward)
    return v @ model.classifier.kernel.numpy() + model.classifier.bias.numpy()


# Tests -----------------------------------------------------------------------


def test_attend_step_matches_numpy():
    model = _model()
    premise, hypothesis = _ids(4, 7), _ids(4, 5)
    premise[1, 4:] = 0
    hypothesis[2, 2:] = 0
    hypothesis[3] = [4, 0, 0, 0, 0]  # a one-word sentence
    mask_a, mask_b = premise != 0, hypothesis != 0
    a, b = _np_embed(model, premise), _np_embed(model, hypothesis)
    expected = _np_attend(model, a, b, mask_a, mask_b)

    got = model._attend(a.astype("float32"), b.astype("float32"), mask_a, mask_b)
    for name, g, e in zip(("beta", "alpha", "to_b", "to_a"), got, expected):
        np.testing.assert_allclose(_np(g), e, atol=1e-5, err_msg=name)

    to_b, to_a = model.alignments((premise, hypothesis))
    np.testing.assert_allclose(_np(to_b), expected[2], atol=1e-5)
    np.testing.assert_allclose(_np(to_a), expected[3], atol=1e-5)
    # Real rows of to_b and real columns of to_a are distributions; padding gets 0.
    np.testing.assert_allclose(_np(to_b).sum(2), mask_a.astype(float), atol=1e-6)
    np.testing.assert_allclose(_np(to_a).sum(1), mask_b.astype(float), atol=1e-6)


@pytest.mark.parametrize("intra_attention", [False, True])
def test_forward_pass_matches_numpy(intra_attention):
    """Embed, (intra-attend,) attend, compare, aggregate; L_a = 13 > 10 clips distances."""
    model = _model(intra_attention)
    premise, hypothesis = _ids(3, 13), _ids(3, 6)
    logits = model((premise, hypothesis))
    assert tuple(logits.shape) == (3, 3)
    np.testing.assert_allclose(_np(logits), _np_logits(model, premise, hypothesis), atol=1e-5)


def _permute_words(ids):
    out = ids.copy()
    for row in out:
        n = int((row != 0).sum())
        row[:n] = row[rng.permutation(n)]
    return out


def test_bag_of_words_invariance_and_padding():
    model = _model()
    premise, hypothesis = _ids(5, 8), _ids(5, 6)
    logits = _np(model((premise, hypothesis)))
    permuted = (_permute_words(premise), _permute_words(hypothesis))
    assert not np.array_equal(permuted[0], premise)
    np.testing.assert_allclose(_np(model(permuted)), logits, atol=1e-5)

    padded = (np.pad(premise, ((0, 0), (0, 4))), np.pad(hypothesis, ((0, 0), (0, 9))))
    np.testing.assert_allclose(_np(model(padded)), logits, atol=1e-5)

    # A fully padded hypothesis gives finite logits, not NaN.
    empty = model((premise, np.zeros_like(hypothesis)))
    assert np.all(np.isfinite(_np(empty)))


def test_intra_attention_sees_word_order_but_not_padding():
    model = _model(intra_attention=True)
    premise, hypothesis = _ids(5, 8, min_len=3), _ids(5, 6, min_len=3)
    logits = _np(model((premise, hypothesis)))
    padded = (np.pad(premise, ((0, 0), (0, 5))), np.pad(hypothesis, ((0, 0), (0, 2))))
    np.testing.assert_allclose(_np(model(padded)), logits, atol=1e-5)
    reversed_premise = premise.copy()
    for row in reversed_premise:
        n = int((row != 0).sum())
        row[:n] = row[:n][::-1]
    assert not np.allclose(_np(model((reversed_premise, hypothesis))), logits, atol=1e-4)


@pytest.mark.jax_pass
def test_learns_shared_word_rule():
    """Label 1 iff the hypothesis shares a word with the premise: an alignment task."""
    n, vocab = 64, 30
    premise = rng.integers(1, vocab, size=(n, 5))
    hypothesis = rng.integers(1, vocab, size=(n, 3))
    hypothesis[1::2, 0] = premise[1::2, 2]  # make about half the pairs share a word
    premise[:, 4][::3] = 0  # some padding
    labels = np.array([bool(set(p[p > 0]) & set(h)) for p, h in zip(premise, hypothesis)])
    assert 0.3 < labels.mean() < 0.8

    model = DecomposableAttention(vocab, 2, embedding_dim=16, hidden_dim=32, dropout=0.0)
    model.build()  # so that the optimizer is built before the step is traced (traced once)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(
        (premise, hypothesis), labels.astype("int32"), batch_size=n, epochs=150, verbose=0
    )
    assert history.history["loss"][-1] < 0.05, history.history["loss"][-1]
    predictions = _np(model((premise, hypothesis))).argmax(-1)
    assert np.mean(predictions == labels) == 1.0


def test_save_reload_and_config_round_trip(tmp_path):
    model = _model(intra_attention=True, dropout=0.1, name="nli")
    config = model.get_config()
    clone = DecomposableAttention.from_config(config)
    assert clone.get_config() == config
    assert clone.intra_attention and clone.dropout == 0.1 and clone.name == "nli"

    inputs = (_ids(3, 7), _ids(3, 4))
    expected = _np(model(inputs))
    path = os.path.join(str(tmp_path), "decomposable.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert isinstance(reloaded, DecomposableAttention)
    np.testing.assert_allclose(_np(reloaded(inputs)), expected, atol=1e-6)
    np.testing.assert_allclose(
        _np(reloaded.alignments(inputs)[0]), _np(model.alignments(inputs)[0]), atol=1e-6
    )


def test_embeddings_initializer_is_used_and_round_trips():
    model = _model(embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0, seed=3))
    model((_ids(2, 5), _ids(2, 4)))
    table = _np(model.embedding.embeddings)
    assert 0.7 < table.std() < 1.3  # Keras' default "uniform" would give about 0.029
    clone = DecomposableAttention.from_config(model.get_config())
    assert isinstance(clone.embeddings_initializer, keras.initializers.RandomNormal)
    assert clone.embeddings_initializer.stddev == 1.0
    default = _model()
    default((_ids(2, 5), _ids(2, 4)))
    assert np.abs(_np(default.embedding.embeddings)).max() <= 0.05


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocab_size": 0}, "vocab_size=0"),
        ({"num_classes": 1}, "num_classes=1"),
        ({"dropout": 1.0}, "dropout=1.0"),
        ({"hidden_dim": -3}, "hidden_dim=-3"),
        ({"embedding_dim": 2.5}, "embedding_dim=2.5"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecomposableAttention(**{"vocab_size": VOCAB, "num_classes": 3, **kwargs})


def test_mixed_float16_is_finite():
    keras.config.set_dtype_policy("mixed_float16")
    model = DecomposableAttention(VOCAB, 3, embedding_dim=6, hidden_dim=5, intra_attention=True)
    premise, hypothesis = _ids(3, 12), _ids(3, 5)
    logits = model((premise, hypothesis))
    assert keras.backend.standardize_dtype(logits.dtype) == "float16"
    assert all(w.dtype == "float32" for w in model.weights)
    assert np.all(np.isfinite(_np(ops.cast(logits, "float32"))))
    for weights in model.alignments((premise, hypothesis)):
        assert np.all(np.isfinite(_np(ops.cast(weights, "float32"))))


def test_inputs_must_be_a_pair():
    with pytest.raises(ValueError, match="must be a pair"):
        _model()(_ids(2, 4))
