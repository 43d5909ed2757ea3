import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import greedy_decode, sample
from tests.decoding.decoding_helpers import START, END, ToyModel, build_real_model, real_source, toy_source


def _toy(**kwargs):
    return ToyModel(vocab=8, max_length=6, seed=6, scale=2.0, end_bias=0.3, **kwargs)


def _prefixes(result, source):
    """(batch index, source row, prefix, emitted token) for every emitted token."""
    for b, row in enumerate(source):
        tokens = result.tokens.numpy()[b]
        for t in range(int(result.lengths.numpy()[b])):
            yield b, row, [START] + list(tokens[:t]), tokens[t]


@pytest.mark.parametrize("kwargs", [{"top_k": 1}, {"top_p": 1e-6}, {"top_k": 1, "temperature": 50.0}])
def test_degenerate_filters_equal_greedy(kwargs):
    toy, source = _toy(), toy_source(batch=8)
    sampled = sample(toy, source, START, END, 6, seed=1, **kwargs)
    greedy = greedy_decode(toy, source, START, END, 6)
    np.testing.assert_array_equal(sampled.tokens.numpy(), greedy.tokens.numpy())
    np.testing.assert_allclose(sampled.scores.numpy(), greedy.scores.numpy(), atol=1e-6)


def test_seed_reproducible_and_scores_are_model_log_probs():
    toy, source = _toy(), toy_source(batch=16)
    first = sample(toy, source, START, END, 6, seed=7, temperature=1.5)
    again = sample(toy, source, START, END, 6, seed=7, temperature=1.5)
    other = sample(toy, source, START, END, 6, seed=8, temperature=1.5)
    np.testing.assert_array_equal(first.tokens.numpy(), again.tokens.numpy())
    assert (first.tokens.numpy() != other.tokens.numpy()).any()
    expected = np.zeros(len(source))
    for b, row, prefix, token in _prefixes(first, source):
        expected[b] += toy.np_step(row, prefix)[0][token]
    np.testing.assert_allclose(first.scores.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert (first.tokens.numpy() > 0).sum(1).min() >= 1


@pytest.mark.parametrize("top_k", [2, 3])
def test_top_k_tokens_are_among_the_k_most_likely(top_k):
    toy, source = _toy(), toy_source(batch=64, seed=2)
    result = sample(toy, source, START, END, 6, top_k=top_k, temperature=3.0, seed=3)
    chosen_ranks = []
    for _, row, prefix, token in _prefixes(result, source):
        log_probs = toy.np_step(row, prefix)[0][1:]  # the padding id is never a candidate
        rank = int((log_probs > log_probs[token - 1]).sum())
        chosen_ranks.append(rank)
    assert max(chosen_ranks) == top_k - 1  # inside the top k, and not only the best


def test_top_p_tokens_are_in_the_nucleus():
    toy, source = _toy(), toy_source(batch=64, seed=3)
    result = sample(toy, source, START, END, 6, top_p=0.7, seed=4)
    better_masses = []
    for _, row, prefix, token in _prefixes(result, source):
        log_probs = toy.np_step(row, prefix)[0]
        probs = np.exp(log_probs[1:]) / np.exp(log_probs[1:]).sum()  # padding excluded
        better_masses.append(probs[probs > probs[token - 1]].sum())
    assert max(better_masses) < 0.7  # the tokens before it had not yet reached p
    assert max(better_masses) > 0.3  # and not only the most likely token was drawn


def _first_token_frequencies(toy, batch, **kwargs):
    source = np.full((batch, 2), 3, "int32")  # one source: one distribution
    tokens = sample(toy, source, START, END, 1, seed=11, **kwargs).tokens.numpy()[:, 0]
    return np.bincount(tokens, minlength=toy.vocab) / batch


def test_empirical_distribution():
    toy, batch = _toy(), 4000
    probs = np.exp(toy.np_step(np.array([3, 3]), [START])[0])[1:]
    probs = probs / probs.sum()
    frequencies = _first_token_frequencies(toy, batch)
    assert frequencies[0] == 0
    np.testing.assert_allclose(frequencies[1:], probs, atol=0.03)
    # A large temperature flattens to uniform over the allowed tokens.
    flat = _first_token_frequencies(toy, batch, temperature=1e4)
    np.testing.assert_allclose(flat[1:], 1 / 7, atol=0.03)
    top3 = _first_token_frequencies(toy, batch, temperature=1e4, top_k=3)
    allowed = 1 + np.argsort(-probs)[:3]
    np.testing.assert_allclose(top3[allowed], 1 / 3, atol=0.03)
    assert top3.sum() == pytest.approx(top3[allowed].sum())


def test_tf_function_seeded_and_unseeded():
    model = build_real_model("rnn_bahdanau")
    draw = tf.function(
        lambda source: sample(model, source, START, END, 6, top_p=0.9, seed=5),
        input_signature=[tf.TensorSpec((None, None), tf.int32)],
    )
    fresh = tf.function(lambda source: sample(model, source, START, END, 6, temperature=5.0).tokens)
    source = np.repeat(real_source(), 8, axis=0)
    eager = sample(model, source, START, END, 6, top_p=0.9, seed=5)
    np.testing.assert_array_equal(draw(source).tokens.numpy(), eager.tokens.numpy())
    assert draw(source[:0]).tokens.shape == (0, 6)
    assert (fresh(source).numpy() != fresh(source).numpy()).any(), "seed=None must not repeat"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"temperature": 0.0}, "temperature=0.0"),
        ({"temperature": -1}, "temperature=-1"),
        ({"top_k": 0}, "top_k=0"),
        ({"top_p": 0.0}, "top_p=0.0"),
        ({"top_p": 1.5}, "top_p=1.5"),
        ({"seed": 1.5}, "seed=1.5"),
        ({"max_length": -3}, "max_length=-3"),
    ],
)
def test_bad_arguments(kwargs, match):
    arguments = dict(model=_toy(), source_ids=toy_source(), start_id=START, end_id=END, max_length=4)
    with pytest.raises(ValueError, match=match):
        sample(**{**arguments, **kwargs})


def test_empty_batch():
    result = sample(_toy(), np.zeros((0, 3), "int32"), START, END, 4, top_k=2, top_p=0.5, seed=0)
    assert result.tokens.shape == (0, 4) and result.scores.shape == (0,)


def test_filters_that_keep_everything_change_nothing():
    toy, source = _toy(), toy_source(batch=16)
    plain = sample(toy, source, START, END, 6, seed=9).tokens.numpy()
    for kwargs in ({"top_k": 100}, {"top_p": 1.0}, {"top_k": 7, "top_p": 1.0}):
        np.testing.assert_array_equal(sample(toy, source, START, END, 6, seed=9, **kwargs).tokens.numpy(), plain)
