import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import beam_search, greedy_decode
from keras_attention.decoding import chunks
from keras_attention.decoding.chunks import _live_rows, chunk_rooms
from tests.decoding.decoding_helpers import REAL_MODELS, START, VOCAB, build_real_model

STEPS = 10  # the longest decode: four chunks of (at most) 3 steps, five of 2 in beam search; each an XLA shape


def varied_source(rows=7, seed=3):
    """Source rows of several lengths (0 is padding)."""
    rng = np.random.default_rng(seed)
    source = rng.integers(3, VOCAB, size=(rows, 8)).astype("int32")
    for row in range(rows):
        source[row, 2 + row % 6:] = 0
    return source


def end_id_that_ends_rows_at_different_steps(model, source, max_length):
    """A token that the rows' greedy translations first emit at varied positions,
    so that rows finish in different chunks (some never do)."""
    tokens = greedy_decode(model, source, START, VOCAB + 1, max_length).tokens.numpy()
    best, best_spread = START + 1, -1
    for token in range(START + 1, VOCAB):
        firsts = {int(np.argmax(row == token)) if (row == token).any() else max_length for row in tokens}
        if len(firsts) > best_spread:
            best, best_spread = token, len(firsts)
    return best


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    # Chunks of 3 steps (beam search: 2) and a first cache room of 4, so that a decode of `STEPS`
    # tokens crosses several chunk boundaries and cache growths, the last one capped (4 -> 8 -> 10).
    monkeypatch.setattr(chunks, "CHUNK_STEPS", 3)
    monkeypatch.setattr(chunks, "BEAM_CHUNK_STEPS", 2)
    monkeypatch.setattr(chunks, "FIRST_ROOM", 4)


def test_chunk_rooms():
    model = build_real_model("transformer_pre")
    assert chunk_rooms(model, 10) == [(3, 4), (6, 8), (9, 10), (10, 10)]
    assert chunk_rooms(model, 2) == [(2, 2)]
    rnn = build_real_model("rnn_luong")  # no growable state: the whole room from the start
    assert chunk_rooms(rnn, 7) == [(3, 7), (6, 7), (7, 7)]


def test_beam_search_has_chunks_of_its_own_length():
    model = build_real_model("transformer_pre")
    assert chunk_rooms(model, 7, beam=True) == [(2, 4), (4, 4), (6, 7), (7, 7)]
    assert chunk_rooms(model, 7) == [(3, 4), (6, 7), (7, 7)]


@pytest.mark.parametrize("done, expected", [
    ([False, True, False, False, True], [0, 2, 3, 0]),  # 3 live rows -> a batch of 4
    ([True, False, True], [1]),
    ([False] * 5, [0, 1, 2, 3, 4]),  # never more rows than the batch
    ([True] * 4, [0]),  # all done: one row, which returns at once
    (np.zeros([0], bool), []),  # an empty batch stays empty
])
def test_live_rows(done, expected):
    assert _live_rows(tf.constant(done)).numpy().tolist() == expected


# Chunking is blind to what a step computes: one Transformer (post- and pre-norm steps are checked against the
# full pass elsewhere) and the RNNs, whose state has no cache to grow.
CHUNKED_MODELS = [name for name in REAL_MODELS if name != "transformer_post"]


@pytest.mark.parametrize("name", CHUNKED_MODELS)
def test_chunked_greedy_decoding_equals_one_loop(name):
    model, source = build_real_model(name), varied_source()
    end_id = end_id_that_ends_rows_at_different_steps(model, source, STEPS)
    attention = name != "rnn_none"  # the fixed-vector RNN has none
    whole = greedy_decode(model, source, START, end_id, STEPS, return_attention=attention)
    lengths = whole.lengths.numpy()
    assert len(set(lengths.tolist())) > 2  # rows end in different chunks
    chunked = greedy_decode(model, source, START, end_id, STEPS, return_attention=attention, chunked=True)
    np.testing.assert_array_equal(chunked.tokens.numpy(), whole.tokens.numpy())
    np.testing.assert_array_equal(chunked.lengths.numpy(), lengths)
    np.testing.assert_allclose(chunked.scores.numpy(), whole.scores.numpy(), atol=1e-5)
    if attention:
        np.testing.assert_allclose(chunked.attention.numpy(), whole.attention.numpy(), atol=1e-5)


@pytest.mark.parametrize("name", ["transformer_pre", "rnn_bahdanau"])
@pytest.mark.parametrize("complete_beam", [True, False])
def test_chunked_beam_search_equals_one_loop(name, complete_beam):
    # The Transformers keep their own beam layout, the RNN the repeated one.
    model, source = build_real_model(name), varied_source()
    end_id = end_id_that_ends_rows_at_different_steps(model, source, STEPS)
    options = dict(beam_size=3, complete_beam=complete_beam, return_attention=True)
    whole = beam_search(model, source, START, end_id, STEPS, **options)
    chunked = beam_search(model, source, START, end_id, STEPS, chunked=True, **options)
    if complete_beam:  # every hypothesis is exact
        expected, got = whole, chunked
    else:  # the best is exact; the other slots are as they were when the row stopped
        expected, got = whole.best(), chunked.best()
    np.testing.assert_array_equal(got.tokens.numpy(), expected.tokens.numpy())
    np.testing.assert_allclose(got.scores.numpy(), expected.scores.numpy(), atol=1e-5)
    np.testing.assert_allclose(got.attention.numpy(), expected.attention.numpy(), atol=1e-5)


def test_chunked_decoding_in_a_graph_of_unknown_shapes():
    model, source = build_real_model("transformer_pre"), varied_source()
    end_id = end_id_that_ends_rows_at_different_steps(model, source, STEPS)
    expected = beam_search(model, source, START, end_id, STEPS, beam_size=2).best().tokens.numpy()
    decode = tf.function(
        lambda s: beam_search(model, s, START, end_id, STEPS, beam_size=2, chunked=True).best().tokens,
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    np.testing.assert_array_equal(decode(source).numpy(), expected)
    np.testing.assert_array_equal(decode(source[:2]).numpy(), expected[:2])
    assert decode(source[:0]).shape == (0, STEPS)  # an empty batch, through every chunk
