import numpy as np
import pytest
import tensorflow as tf

from keras_attention.models import Transformer

from keras_attention.decoding import UncachedDecoder, greedy_decode
from keras_attention.decoding import common
from keras_attention.decoding.common import decoding_stages
from tests.decoding.decoding_helpers import (
    END,
    REAL_MODELS,
    START,
    ToyModel,
    build_real_model,
    np_greedy,
    real_source,
    teacher_forced,
    toy_source,
)


@pytest.fixture(scope="module", params=REAL_MODELS)
def real_model(request):
    return request.param, build_real_model(request.param)


def end_id_seen_mid_sequence(model, source, max_length):
    """A token that greedy decoding emits for the first time at position >= 2
    of some row, and that position, so that random models also exercise
    stopping; (END, None) if there is none. Not 0: rows that ended are padded with it."""
    tokens = greedy_decode(model, source, START, END, max_length).tokens.numpy()
    for row in tokens:
        for t in range(2, max_length - 1):
            if row[t] not in row[:t] and row[t] not in (0, START):
                return int(row[t]), t
    return END, None


def end_id_first_seen_after(model, source, max_length, position):
    """A token that greedy decoding first emits at `position` or later in some
    row (so that row runs that long, and ends), or a token it never emits (never 0, the padding)."""
    probe = greedy_decode(model, source, START, END, max_length).tokens.numpy()
    unused = next(t for t in range(START + 2, model.target_vocab_size) if t not in probe)
    tokens = greedy_decode(model, source, START, unused, max_length).tokens.numpy()
    for row in tokens:
        for t in range(position, max_length - 1):
            if row[t] not in row[:t] and row[t] != 0:
                return int(row[t])
    return unused


def test_toy_matches_numpy_argmax_loop():
    toy, source = ToyModel(vocab=7, max_length=8, seed=1, end_bias=0.5), toy_source(batch=6)
    result = greedy_decode(toy, source, START, END, 8, return_attention=True)
    tokens, scores = np_greedy(toy, source, 8)
    np.testing.assert_array_equal(result.tokens.numpy(), tokens)
    np.testing.assert_allclose(result.scores.numpy(), scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.log_probs.numpy(), scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(result.lengths.numpy(), (tokens > 0).sum(1))
    assert (tokens == END).any() and (tokens[:, -1] == 0).any(), "the toy should exercise stopping"
    # Attention rows: the reference's, then zeros after the end.
    for b, row in enumerate(source):
        prefix = [START]
        for t in range(8):
            expected = toy.np_step(row, prefix)[1] if t < result.lengths[b] else np.zeros(len(row))
            np.testing.assert_array_equal(result.attention.numpy()[b, t], expected)
            prefix.append(tokens[b, t])


def test_argmax_last_is_numpys_first_maximum():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 50)).astype("float32")
    logits[1, [3, 7]] = 9.0  # a tie: the first index wins, as in NumPy
    logits[2] = -np.inf
    logits[2, 5] = 0.0
    got = common.argmax_last(tf.constant(logits)).numpy()
    assert got.dtype == np.int32 and got.tolist() == np.argmax(logits, axis=-1).tolist()
    assert got[1] == 3 and got[2] == 5


def test_stops_early_when_every_row_has_ended():
    toy = ToyModel(max_length=6, end_bias=20.0)
    result = greedy_decode(toy, toy_source(), START, END, 6)
    np.testing.assert_array_equal(result.tokens.numpy()[:, 0], END)
    assert toy.calls == 1


def test_cached_equals_uncached_and_teacher_forced_scores(real_model):
    name, model = real_model
    source = real_source()
    end_id, end_position = end_id_seen_mid_sequence(model, source, 10)
    with_attention = name != "rnn_none"
    cached = greedy_decode(model, source, START, end_id, 10, return_attention=with_attention)
    uncached = greedy_decode(UncachedDecoder(model), source, START, end_id, 10)
    tokens = cached.tokens.numpy()
    np.testing.assert_array_equal(tokens, uncached.tokens.numpy())
    np.testing.assert_allclose(cached.scores.numpy(), uncached.scores.numpy(), atol=1e-4)
    if end_position is not None:
        row = np.flatnonzero(tokens[:, end_position] == end_id)[0]
        assert (tokens[row, end_position + 1 :] == 0).all()

    # Independent scoring: the full pass on the decoded sequence.
    log_probs, attention = teacher_forced(model, source, tokens)
    np.testing.assert_allclose(cached.scores.numpy(), log_probs.sum(1), rtol=1e-4, atol=1e-4)
    if with_attention:
        alive = (tokens > 0)[..., None]
        np.testing.assert_allclose(cached.attention.numpy(), np.where(alive, attention, 0), atol=1e-5)
    else:
        assert cached.attention is None


def test_tf_function_with_unknown_batch_and_length():
    model = build_real_model("transformer_post")
    decode = tf.function(
        lambda source: greedy_decode(model, source, START, END, 7, return_attention=True),
        input_signature=[tf.TensorSpec((None, None), tf.int32)],
    )
    source = real_source()
    eager = greedy_decode(model, source, START, END, 7, return_attention=True)
    for batch in (source, source[:1, :3]):
        graph = decode(batch)
        expected = greedy_decode(model, batch, START, END, 7)
        np.testing.assert_array_equal(graph.tokens.numpy(), expected.tokens.numpy())
        np.testing.assert_allclose(graph.scores.numpy(), expected.scores.numpy(), atol=1e-5)
    np.testing.assert_allclose(decode(source).attention.numpy(), eager.attention.numpy(), atol=1e-6)
    assert decode.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_single_row_decodes_like_the_same_row_in_a_batch(jit_compile):
    """A batch of one row translates as that row does in a larger batch (graph and XLA)."""
    model = build_real_model("transformer_pre")
    source = real_source()
    decode = tf.function(
        lambda s: greedy_decode(model, s, START, END, 7, return_attention=True), jit_compile=jit_compile
    )
    together = decode(source)
    for i in range(len(source)):
        alone = decode(source[i : i + 1])
        assert alone.tokens.shape == (1, 7) and alone.attention.shape == (1, 7, source.shape[1])
        np.testing.assert_array_equal(alone.tokens.numpy()[0], together.tokens.numpy()[i])
        np.testing.assert_allclose(alone.scores.numpy()[0], together.scores.numpy()[i], atol=1e-5)
        np.testing.assert_allclose(alone.attention.numpy()[0], together.attention.numpy()[i], atol=1e-5)
        assert alone.lengths.numpy()[0] == together.lengths.numpy()[i]


def test_empty_batch():
    model = build_real_model("transformer_pre")
    result = greedy_decode(model, np.zeros((0, 5), "int32"), START, END, 4, return_attention=True)
    assert result.tokens.shape == (0, 4) and result.scores.shape == (0,)
    assert result.attention.shape == (0, 4, 5) and result.tokens.dtype == "int32"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_length": 0}, "max_length=0"),
        ({"max_length": 2.5}, "max_length=2.5"),
        ({"start_id": 0}, "start_id=0"),
        ({"end_id": -1}, "end_id=-1"),
        ({"source_ids": np.zeros((3,), "int32")}, r"source_ids.shape=\(3,\)"),
        ({"source_ids": np.zeros((2, 3, 4), "int32")}, r"source_ids.shape=\(2, 3, 4\)"),
        ({"source_ids": np.zeros((2, 3), "float32")}, "source_ids.dtype=float32"),
    ],
)
def test_bad_arguments(kwargs, match):
    arguments = dict(model=ToyModel(), source_ids=toy_source(), start_id=START, end_id=END, max_length=4)
    with pytest.raises(ValueError, match=match):
        greedy_decode(**{**arguments, **kwargs})


def test_models_that_cannot_decode_are_errors():
    with pytest.raises(ValueError, match="model="):
        greedy_decode(object(), real_source(), START, END, 4)
    unbuilt = Transformer(30, 30, num_layers=1, d_model=8, num_heads=2, intermediate_dim=8)
    for model in (unbuilt, UncachedDecoder(unbuilt)):
        with pytest.raises(ValueError, match="must be built"):
            greedy_decode(model, real_source(), START, END, 4)


def test_attention_from_a_model_without_attention_is_an_error():
    model = build_real_model("rnn_none")
    with pytest.raises(ValueError, match="return_attention=True"):
        greedy_decode(model, real_source(), START, END, 4, return_attention=True)


def test_decoding_stages():
    model = build_real_model("transformer_post")
    assert decoding_stages(model, 64) == [common.FIRST_STAGE, 64] == [32, 64]
    assert decoding_stages(model, 32) == [32] and decoding_stages(model, 7) == [7]
    assert decoding_stages(UncachedDecoder(model), 64) == [64]  # no `grow_decoding_state`


def test_caches_that_grow_past_the_first_stage_decode_as_the_full_prefix_does(monkeypatch):
    # A Transformer's caches start with room for FIRST_STAGE positions (8
    # here) and grow to max_length (30) when a batch decodes further: the
    # tokens, scores and attention must be those of re-running the whole
    # prefix, eagerly and under XLA. (Growth is the same for post- and
    # pre-norm blocks; tests/models/test_transformer_decoding.py takes both.)
    monkeypatch.setattr(common, "FIRST_STAGE", 8)
    model, source = build_real_model("transformer_pre"), real_source()
    assert decoding_stages(model, 30) == [8, 30]
    end_id = end_id_first_seen_after(model, source, 30, 9)
    cached = greedy_decode(model, source, START, end_id, 30, return_attention=True)
    assert cached.lengths.numpy().max() > 8  # some row decodes past the first stage
    uncached = greedy_decode(UncachedDecoder(model), source, START, end_id, 30)
    np.testing.assert_array_equal(cached.tokens.numpy(), uncached.tokens.numpy())
    np.testing.assert_allclose(cached.scores.numpy(), uncached.scores.numpy(), atol=1e-4)
    _, attention = teacher_forced(model, source, cached.tokens.numpy())
    alive = (cached.tokens.numpy() > 0)[..., None]
    np.testing.assert_allclose(cached.attention.numpy(), np.where(alive, attention, 0), atol=1e-5)
    compiled = tf.function(lambda s: greedy_decode(model, s, START, end_id, 30).tokens, jit_compile=True)
    np.testing.assert_array_equal(compiled(source).numpy(), cached.tokens.numpy())
