import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import UncachedDecoder, beam_search, common, greedy_decode
from tests.decoding.decoding_helpers import (
    END,
    REAL_MODELS,
    START,
    ToyModel,
    build_real_model,
    lp,
    np_all_hypotheses,
    np_beam,
    pad_to,
    real_source,
    teacher_forced,
    toy_source,
)
from tests.decoding.test_greedy import end_id_first_seen_after, end_id_seen_mid_sequence


def _check_against(result, b, expected, max_length):
    """Beam row `b` equals the reference hypotheses (score, log_prob, tokens)."""
    k = len(expected)
    np.testing.assert_array_equal(
        result.tokens.numpy()[b, :k], [pad_to(tokens, max_length) for _, _, tokens in expected]
    )
    np.testing.assert_allclose(result.scores.numpy()[b, :k], [h[0] for h in expected], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.log_probs.numpy()[b, :k], [h[1] for h in expected], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(result.lengths.numpy()[b, :k], [len(h[2]) for h in expected])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
@pytest.mark.parametrize("max_length", [3, 4])
def test_exhaustive_beam_equals_brute_force(alpha, max_length):
    # V = 5 (padding, start, end and two more): with K >= the number of
    # possible outputs, no candidate is ever dropped, so the beam is exact.
    toy, source = ToyModel(vocab=5, max_length=max_length, seed=2, end_bias=1.0), toy_source(batch=3)
    expected = [np_all_hypotheses(toy, row, max_length, alpha) for row in source]
    beam_size = len(expected[0])  # 40 for L=3, 121 for L=4
    result = beam_search(toy, source, START, END, max_length, beam_size=beam_size, length_penalty=alpha)
    assert result.tokens.shape == (3, beam_size, max_length)
    for b in range(3):
        _check_against(result, b, expected[b], max_length)
    np.testing.assert_allclose(
        result.scores.numpy(), result.log_probs.numpy() / lp(result.lengths.numpy(), alpha), rtol=1e-6
    )


@pytest.mark.parametrize("beam_size, alpha", [(2, 0.0), (3, 0.6), (5, 1.0), (9, 0.6)])
def test_small_beams_equal_python_reference(beam_size, alpha):
    toy, source = ToyModel(vocab=6, max_length=6, seed=3, end_bias=0.8), toy_source(batch=4, seed=1)
    result = beam_search(
        toy, source, START, END, 6, beam_size=beam_size, length_penalty=alpha, return_attention=True
    )
    scores = result.scores.numpy()
    assert (np.diff(scores, axis=1) <= 0).all(), "hypotheses must be sorted best first"
    for b, row in enumerate(source):
        expected = np_beam(toy, row, 6, beam_size, alpha)
        _check_against(result, b, expected, 6)
        # Attention rows tracked through the reordering.
        for k, (_, _, tokens) in enumerate(expected):
            prefix = [START]
            for t in range(6):
                want = toy.np_step(row, prefix)[1] if t < len(tokens) else np.zeros(len(row))
                np.testing.assert_array_equal(result.attention.numpy()[b, k, t], want)
                prefix.append(tokens[t] if t < len(tokens) else 0)


def test_a_vocabulary_ranked_block_by_block_equals_python_reference():
    """Chunked (XLA) decoding ranks each hypothesis' 300 words from block maxima (decoding.top_k), the plain
    loop with one top K: both find the reference's hypotheses."""
    toy, source = ToyModel(vocab=300, max_length=5, seed=6, end_bias=2.0), toy_source(batch=3, seed=4)
    plain = beam_search(toy, source, START, END, 5, beam_size=4, length_penalty=0.6)
    chunked = tf.function(lambda s: beam_search(toy, s, START, END, 5, beam_size=4, length_penalty=0.6,
                                                chunked=True))(source)
    for result in (plain, chunked):
        for b, row in enumerate(source):
            _check_against(result, b, np_beam(toy, row, 5, 4, 0.6), 5)


def test_finished_hypotheses_keep_their_score_and_search_stops_early():
    toy = ToyModel(vocab=6, max_length=8, seed=4, end_bias=4.0)
    source = toy_source(batch=2)
    result = beam_search(toy, source, START, END, 8, beam_size=2, length_penalty=0.6)
    assert toy.calls < 8, "every beam ended early, the loop should have stopped"
    tokens = result.tokens.numpy()
    assert (tokens == END).sum(-1).max() == 1 and (tokens[..., -1] == 0).all()
    for b, row in enumerate(source):
        _check_against(result, b, np_beam(toy, row, 8, 2, 0.6), 8)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_stopping_once_the_best_is_settled_keeps_the_best(alpha):
    toy, source = ToyModel(vocab=6, max_length=12, seed=4, end_bias=1.0), toy_source(batch=6, seed=2)
    complete = beam_search(toy, source, START, END, 12, beam_size=3, length_penalty=alpha)
    steps_complete, toy.calls = toy.calls, 0
    settled = beam_search(toy, source, START, END, 12, beam_size=3, length_penalty=alpha, complete_beam=False)
    a, b = complete.best(), settled.best()
    np.testing.assert_array_equal(b.tokens.numpy(), a.tokens.numpy())
    np.testing.assert_array_equal(b.lengths.numpy(), a.lengths.numpy())
    np.testing.assert_allclose(b.scores.numpy(), a.scores.numpy(), rtol=1e-6)
    assert toy.calls <= steps_complete
    if alpha < 1:  # here a wandering hypothesis keeps the complete beam going; the best is settled sooner
        assert steps_complete == 12 and toy.calls < steps_complete


def test_beam_size_one_equals_greedy():
    toy, source = ToyModel(vocab=7, max_length=7, seed=5, end_bias=0.5), toy_source(batch=5)
    beam = beam_search(toy, source, START, END, 7, beam_size=1, length_penalty=0.6).best()
    greedy = greedy_decode(toy, source, START, END, 7)
    np.testing.assert_array_equal(beam.tokens.numpy(), greedy.tokens.numpy())
    np.testing.assert_allclose(beam.log_probs.numpy(), greedy.scores.numpy(), atol=1e-6)


@pytest.fixture(scope="module", params=REAL_MODELS)
def real_model(request):
    return request.param, build_real_model(request.param)


def test_cached_equals_uncached_and_teacher_forced_scores(real_model):
    name, model = real_model
    source = real_source()
    end_id, _ = end_id_seen_mid_sequence(model, source, 8)
    with_attention = name != "rnn_none"
    cached = beam_search(model, source, START, end_id, 8, beam_size=3, return_attention=with_attention)
    uncached = beam_search(UncachedDecoder(model), source, START, end_id, 8, beam_size=3)
    tokens = cached.tokens.numpy()  # (B, K, L)
    np.testing.assert_array_equal(tokens, uncached.tokens.numpy())
    np.testing.assert_allclose(cached.scores.numpy(), uncached.scores.numpy(), atol=1e-4)
    assert (tokens == end_id).any()

    # Independent scoring of every hypothesis with the full pass.
    flat = tokens.reshape(-1, 8)
    log_probs, attention = teacher_forced(model, np.repeat(source, 3, axis=0), flat)
    np.testing.assert_allclose(cached.log_probs.numpy().reshape(-1), log_probs.sum(1), rtol=1e-4, atol=1e-4)
    if with_attention:
        expected = np.where((flat > 0)[..., None], attention, 0).reshape(cached.attention.shape)
        np.testing.assert_allclose(cached.attention.numpy(), expected, atol=1e-5)

    one = beam_search(model, source, START, end_id, 8, beam_size=1).best()
    greedy = greedy_decode(model, source, START, end_id, 8)
    np.testing.assert_array_equal(one.tokens.numpy(), greedy.tokens.numpy())


def test_decoding_constants_are_passed_through_unchanged(real_model):
    """What a model declares constant (never reordered by beam search) really is."""
    _, model = real_model
    source = real_source()
    state = model.init_decoding_state(source, 5)
    assert set(model.decoding_constants) & set(state), "no declared constant is in the state"
    tokens = np.full((len(source),), START, "int32")
    for index in range(3):
        _, new_state, _ = model.decode_step(state, tokens, index)
        for key in model.decoding_constants:
            if key in state:
                tf.nest.map_structure(
                    lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), state[key], new_state[key]
                )
        state, tokens = new_state, tokens + 1


@pytest.mark.parametrize("name", ["transformer_pre", "rnn_luong"])
def test_tf_function_with_unknown_batch_and_length(name):
    model = build_real_model(name)
    search = tf.function(
        lambda source: beam_search(model, source, START, END, 6, beam_size=3, return_attention=True),
        input_signature=[tf.TensorSpec((None, None), tf.int32)],
    )
    source = real_source()
    for batch in (source, source[1:, :4], source[:0]):
        graph, eager = search(batch), beam_search(model, batch, START, END, 6, beam_size=3, return_attention=True)
        np.testing.assert_array_equal(graph.tokens.numpy(), eager.tokens.numpy())
        np.testing.assert_allclose(graph.scores.numpy(), eager.scores.numpy(), atol=1e-5)
        assert graph.attention.shape == (len(batch), 3, 6, batch.shape[1])
    assert search.experimental_get_tracing_count() == 1


def test_empty_batch():
    result = beam_search(ToyModel(), np.zeros((0, 4), "int32"), START, END, 5, beam_size=3, return_attention=True)
    assert result.tokens.shape == (0, 3, 5) and result.scores.shape == (0, 3)
    assert result.attention.shape == (0, 3, 5, 4) and result.best().tokens.shape == (0, 5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"beam_size": 0}, "beam_size=0"),
        ({"length_penalty": -0.1}, "length_penalty=-0.1"),
        ({"length_penalty": "0.6"}, "length_penalty='0.6'"),
        ({"max_length": 0}, "max_length=0"),
        ({"source_ids": np.zeros((4,), "int32")}, r"source_ids.shape=\(4,\)"),
    ],
)
def test_bad_arguments(kwargs, match):
    arguments = dict(model=ToyModel(), source_ids=toy_source(), start_id=START, end_id=END, max_length=4)
    with pytest.raises(ValueError, match=match):
        beam_search(**{**arguments, **kwargs})


def test_xla_compiled_greedy_and_beam_agree_with_eager():
    model = build_real_model("transformer_post")
    source = real_source()
    for decode, kwargs in ((greedy_decode, {}), (beam_search, {"beam_size": 3})):
        compiled = tf.function(
            lambda s: decode(model, s, START, END, 6, return_attention=True, **kwargs),
            input_signature=[tf.TensorSpec((None, None), tf.int32)],
            jit_compile=True,
        )
        graph, eager = compiled(source), decode(model, source, START, END, 6, return_attention=True, **kwargs)
        np.testing.assert_array_equal(graph.tokens.numpy(), eager.tokens.numpy())
        np.testing.assert_allclose(graph.scores.numpy(), eager.scores.numpy(), atol=1e-4)
        np.testing.assert_allclose(graph.attention.numpy(), eager.attention.numpy(), atol=1e-5)


def test_caches_that_grow_past_the_first_stage_search_as_the_full_prefix_does(monkeypatch):
    # The beam's shared caches and their history table grow from 8 to 14
    # positions mid-search: every hypothesis, score and attention row must be
    # those of re-running the whole prefix, eagerly and under XLA.
    monkeypatch.setattr(common, "FIRST_STAGE", 8)
    model, source = build_real_model("transformer_pre"), real_source()
    end_id = end_id_first_seen_after(model, source, 14, 9)
    cached = beam_search(model, source, START, end_id, 14, beam_size=3, return_attention=True)
    assert cached.lengths.numpy().max() > 8
    uncached = beam_search(UncachedDecoder(model), source, START, end_id, 14, beam_size=3)
    np.testing.assert_array_equal(cached.tokens.numpy(), uncached.tokens.numpy())
    np.testing.assert_allclose(cached.scores.numpy(), uncached.scores.numpy(), atol=1e-4)
    flat = cached.tokens.numpy().reshape(-1, 14)
    _, attention = teacher_forced(model, np.repeat(source, 3, axis=0), flat)
    expected = np.where((flat > 0)[..., None], attention, 0).reshape(cached.attention.shape)
    np.testing.assert_allclose(cached.attention.numpy(), expected, atol=1e-5)
    compiled = tf.function(
        lambda s: beam_search(model, s, START, end_id, 14, beam_size=3).tokens, jit_compile=True
    )
    np.testing.assert_array_equal(compiled(source).numpy(), cached.tokens.numpy())
