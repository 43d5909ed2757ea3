"""Property: outputs at real positions do not depend on the padding (how much, or what it holds).

For random batches of rows of random lengths, each layer runs once on the
batch padded to its longest row (under JAX, to 7 positions) and once with extra padding whose content is
random garbage; the masks are passed the way a user passes them. The real
positions' outputs must agree to float32 round-off. Hypothesis draws the
cases from a fixed seed (`derandomize=True`), a bounded number of them.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_attention.layers import BahdanauAttention, LuongAttention, TransformerDecoder, TransformerEncoder
from keras_attention.models import Seq2SeqRNN
from tests.test_case import one_shape_under_jax

pytestmark = pytest.mark.jax_pass  # the layers hold the backend ops: all of them run on JAX too

D = 8
ROWS, WIDTH = 3, 7  # at most 3 rows of at most 7 positions
# Under JAX, where each op compiles anew for every shape it meets, every case has 3 rows padded to 7 positions, and 5
# more: the cases share their compiled ops, while the lengths, the values and the garbage still vary.
CASES = settings(max_examples=12, deadline=None, derandomize=True, database=None)
lengths_st = st.lists(st.integers(1, WIDTH), min_size=one_shape_under_jax(1, ROWS), max_size=ROWS)
extra_st = one_shape_under_jax(st.integers(1, 5), st.just(5))
# An RNN's loop (a `lax.scan` under JAX) compiles anew at every call whatever the shapes: its test keeps varied shapes
# on both backends, and runs a third as many cases under JAX.
RNN_CASES = settings(CASES, max_examples=one_shape_under_jax(12, 4))
varied_lengths_st = st.lists(st.integers(1, WIDTH), min_size=1, max_size=ROWS)
varied_extra_st = st.integers(1, 5)


def padded(lengths, extra, seed, depth=D):
    """Two versions of the same rows: `(B, W, depth)` and `(B, W + extra, depth)`, garbage in the padding, where
    W is the longest row (7 under JAX). `seed` seeds NumPy's generator (an int or a list of ints).

    Returns the two arrays and their boolean masks (True at real positions).
    """
    rng = np.random.default_rng(seed)
    width = one_shape_under_jax(max(lengths), WIDTH)
    short = rng.normal(size=(len(lengths), width, depth)).astype("float32")
    long = rng.normal(size=(len(lengths), width + extra, depth)).astype("float32") * 50  # garbage
    masks = []
    for row, n in enumerate(lengths):
        long[row, :n] = short[row, :n]
        short[row, n:] = rng.normal(size=(width - n, depth)) * 50  # different garbage
        masks.append((np.arange(width) < n, np.arange(width + extra) < n))
    short_mask = np.stack([m[0] for m in masks])
    long_mask = np.stack([m[1] for m in masks])
    return short, long, short_mask, long_mask


def assert_same_at_real_positions(a, b, mask):
    a, b = np.asarray(a), np.asarray(b)[:, : a.shape[1]]
    np.testing.assert_allclose(a[mask], b[mask[:, : a.shape[1]]], atol=2e-5, rtol=1e-4)


@CASES
@given(lengths=lengths_st, extra=extra_st)
def test_transformer_encoder(lengths, extra):
    short, long, short_mask, long_mask = padded(lengths, extra, seed=[0, *lengths, extra])
    layer = TransformerEncoder(num_heads=2, intermediate_dim=16)
    assert_same_at_real_positions(layer(short, padding_mask=short_mask), layer(long, padding_mask=long_mask),
                                  short_mask)


@CASES
@given(lengths=lengths_st, extra=extra_st, source_lengths=lengths_st, source_extra=extra_st)
def test_transformer_decoder(lengths, extra, source_lengths, source_extra):
    n = min(len(lengths), len(source_lengths))
    lengths, source_lengths = lengths[:n], source_lengths[:n]
    short, long, short_mask, long_mask = padded(lengths, extra, seed=[1, *lengths, extra])
    enc_short, enc_long, enc_short_mask, enc_long_mask = padded(source_lengths, source_extra,
                                                                seed=[2, *source_lengths, source_extra])
    layer = TransformerDecoder(num_heads=2, intermediate_dim=16)
    a = layer(short, enc_short, decoder_padding_mask=short_mask, encoder_padding_mask=enc_short_mask)
    b = layer(long, enc_long, decoder_padding_mask=long_mask, encoder_padding_mask=enc_long_mask)
    assert_same_at_real_positions(a, b, short_mask)


@CASES
@given(lengths=lengths_st, extra=extra_st, kind=st.sampled_from(["bahdanau", "luong_general", "luong_dot"]))
def test_rnn_attention_ignores_masked_values(lengths, extra, kind):
    values_short, values_long, short_mask, long_mask = padded(lengths, extra, seed=[3, *lengths, extra])
    query = np.random.default_rng([4, *lengths, extra]).normal(size=(len(lengths), D)).astype("float32")
    if kind == "bahdanau":
        layer = BahdanauAttention(units=8)
    else:
        layer = LuongAttention(score=kind.split("_")[1])
    context_a, weights_a = layer(query, values_short, value_mask=short_mask, return_attention_scores=True)
    context_b, weights_b = layer(query, values_long, value_mask=long_mask, return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(context_a), np.asarray(context_b), atol=2e-5, rtol=1e-4)
    weights_b = np.asarray(weights_b)
    assert np.all(weights_b[~long_mask] == 0)  # no weight on padding
    np.testing.assert_allclose(np.asarray(weights_a)[short_mask], weights_b[long_mask], atol=1e-6)


@RNN_CASES
@given(lengths=varied_lengths_st, extra=varied_extra_st, cell=st.sampled_from(["gru", "lstm"]))
def test_bidirectional_rnn_encoder(lengths, extra, cell):
    """The backward direction must start at each row's last real token, not in the padding."""
    model = Seq2SeqRNN(30, 30, attention="bahdanau", cell=cell, embedding_dim=8, units=8)
    rng = np.random.default_rng([*lengths, extra])
    width = max(lengths)
    ids = np.zeros((len(lengths), width), "int32")
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(1, 30, n)
    longer = np.concatenate([ids, np.zeros((len(lengths), extra), "int32")], axis=1)
    carry_a, constants_a = model.encode(ids)
    carry_b, constants_b = model.encode(longer)
    mask = ids != 0
    assert_same_at_real_positions(constants_a["encoder_output"], constants_b["encoder_output"], mask)
    for a, b in zip(carry_a["states"], carry_b["states"]):  # the decoder's initial state
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=1e-4)
