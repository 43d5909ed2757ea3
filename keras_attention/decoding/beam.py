"""Beam search with the GNMT length penalty and early stopping on the end token."""

import keras
from keras import ops

from keras_attention.decoding.chunks import chunk_rooms, run_in_chunks
from keras_attention.decoding.common import (
    NEG_INF,
    DecodeResult,
    check_attention,
    check_common_arguments,
    decoding_stages,
    mask_padding,
    run_in_stages,
    write_column,
)
from keras_attention.decoding.options import DEFAULTS, DecodingOptions
from keras_attention.decoding.top_k import blockwise_top_k


def length_penalty_factor(lengths, alpha):
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def reorder_state(state, flat_parents, constants=frozenset()):
    """Gather every state tensor along axis 0 by `flat_parents` `(B * K,)`.

    Top-level entries of a dict state named in `constants` are left alone:
    they hold one copy per hypothesis of something that depends only on the
    source (encoder output, cross-attention keys and values), and a parent
    is always a hypothesis of the same source row, so gathering them would
    copy equal rows onto equal rows at every step.
    """
    take = lambda t: ops.take(t, flat_parents, axis=0)  # noqa: E731
    if not isinstance(state, dict):
        return keras.tree.map_structure(take, state)
    return {k: v if k in constants else keras.tree.map_structure(take, v) for k, v in state.items()}


def beam_search(
    model,
    source_ids,
    start_id,
    end_id,
    max_length,
    beam_size=DEFAULTS.beam_size,
    length_penalty=DEFAULTS.length_penalty,
    return_attention=False,
    complete_beam=True,
    chunked=False,
):
    """Translate a batch keeping the `beam_size` best hypotheses at each step.

    Every source row gets `beam_size` hypotheses, decoded together as one
    batch of `B * beam_size` rows. A model with `init_beam_state(source_ids,
    max_length, beam_size)` and `reorder_beam_state(state, parents)` (such as
    `models.Transformer`) keeps its own beam layout and is told each step's
    parents `(B, K)`; for any other model the state is repeated once after
    the encoder and reordered with the surviving hypotheses at every step,
    except the entries the model lists in its `decoding_constants`
    attribute, which depend on the source alone and are never reordered.
    Hypotheses are ranked by GNMT's length-normalised score (Wu et al. 2016,
    https://arxiv.org/abs/1609.08144, section 7):

        score(Y) = log P(Y | X) / lp(Y),  lp(Y) = ((5 + |Y|) / 6) ** alpha

    with `|Y|` the number of emitted tokens, the end token included, and
    `alpha = length_penalty` (0 ranks by the raw log-probability). A
    hypothesis that emits `end_id` is finished: it keeps its beam slot and its
    score, only pads from then on, and leaves the beam only if `beam_size`
    better hypotheses turn up. The graph `while` loop stops after
    `max_length` tokens, or when every hypothesis of every row has finished
    (`complete_beam=True`), or, with `complete_beam=False`, as soon as every
    row's best translation is settled: its best finished hypothesis scores
    at least what any descendant of its unfinished ones could
    (`log P / lp(max_length)`, since continuing only lowers `log P`). The
    best translation and its score are the same either way; the other beam
    slots are then as they were when the loop stopped. Unfinished
    hypotheses are scored at the length they reached. The
    padding id 0 is never emitted. With `beam_size=1` this is greedy decoding.

    Args:
        model: a model with `init_decoding_state` and `decode_step`, such as
            `models.Transformer` or `models.Seq2SeqRNN`.
        source_ids: int `(B, S)` source token ids, 0 for padding.
        start_id: int. The [START] token id.
        end_id: int. The [END] token id (kept in the output).
        max_length: int. Most tokens a hypothesis may emit.
        beam_size: int >= 1. Hypotheses kept per row. Defaults to 4.
        length_penalty: float in [0, 10]. GNMT's alpha. Defaults to 0.6.
        return_attention: bool. Also return each hypothesis' attention rows,
            reordered along with it. Defaults to False.
        complete_beam: bool. Decode until all `beam_size` hypotheses have
            finished, so that every one of them is exact (True), or only
            until each row's best is settled (False: the same best, fewer
            steps). Defaults to True.
        chunked: bool. Decode in XLA-compiled chunks of steps that leave
            the rows that are done behind (`keras_attention.decoding.chunks`):
            the same best translations, less work for batches of mixed
            lengths. TensorFlow graphs only (inside `tf.function`). Defaults
            to False.

    Returns:
        A `DecodeResult` with a beam axis, best hypothesis first: `tokens`
        int32 `(B, K, max_length)`, `scores` float32 `(B, K)` (length
        penalised), `log_probs` float32 `(B, K)`, `lengths` int32 `(B, K)`,
        `attention` float32 `(B, K, max_length, S)` or None. Use
        `result.best()` for the top hypothesis alone. When fewer than `K`
        hypotheses exist (a tiny vocabulary), the extra ones score -inf.

    Example:

    >>> import keras
    >>> from keras_attention.models import Transformer
    >>> model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)
    >>> source = keras.ops.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
    >>> _ = model((source, source))  # build (or train, or load) the model first
    >>> result = beam_search(model, source, 1, 2, max_length=6, beam_size=3)
    >>> tuple(result.tokens.shape), tuple(result.best().tokens.shape)
    ((2, 3, 6), (2, 6))
    """
    source_ids = check_common_arguments(model, source_ids, start_id, end_id, max_length)
    checked = DecodingOptions(method="beam", beam_size=beam_size, length_penalty=length_penalty)
    beam, alpha = checked.beam_size, checked.length_penalty
    batch, source_length = ops.shape(source_ids)[0], ops.shape(source_ids)[1]

    own_layout = hasattr(model, "init_beam_state") and hasattr(model, "reorder_beam_state")
    stages = decoding_stages(model, max_length) if own_layout else [max_length]
    if chunked:
        stages = [chunk_rooms(model, max_length, beam=True)[0][1]] if own_layout else [max_length]
    state = _start_state(model, source_ids, stages[0], beam, own_layout)
    constants = frozenset(getattr(model, "decoding_constants", ()))

    def step(index, state, inputs, finished, lengths, log_probs, tokens, attention):
        batch = ops.shape(finished)[0]  # rows of this step (fewer once chunks drop the finished)
        offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * beam, 1)  # (B, 1)
        logits, state, step_attention = model.decode_step(state, inputs, index)
        if return_attention:
            step_attention = check_attention(step_attention, True)  # (BK, S)
        else:
            step_attention = ops.zeros((batch * beam,), "float32")  # a batch-major placeholder
        logits = ops.cast(logits, "float32")  # (BK, V)
        vocab = ops.shape(logits)[-1]
        logits = ops.reshape(logits, (batch, beam, vocab))  # (B, K, V)
        best, parents, next_tokens, candidate_log_probs, new_lengths = _best_continuations(
            logits, finished, log_probs, lengths, beam, alpha, blockwise=chunked)

        # Reorder everything along with the surviving hypotheses.
        log_probs = ops.take_along_axis(ops.reshape(candidate_log_probs, (batch, -1)), best, axis=1)
        was_finished = ops.take_along_axis(finished, parents, axis=1)
        lengths = ops.take_along_axis(new_lengths, parents, axis=1)
        flat_parents = ops.reshape(offsets + ops.cast(parents, "int32"), (-1,))  # (BK,)
        if own_layout:
            state = model.reorder_beam_state(state, ops.cast(parents, "int32"))
        else:
            state = reorder_state(state, flat_parents, constants)
        tokens, step_attention, attention = keras.tree.map_structure(
            lambda t: ops.take(t, flat_parents, axis=0), (tokens, step_attention, attention)
        )
        # Hypotheses at -inf (fewer candidates than beams) count as finished.
        dead = ops.logical_or(was_finished, ops.equal(log_probs, NEG_INF))  # (B, K)
        next_tokens = ops.reshape(ops.where(dead, 0, next_tokens), (-1,))  # (BK,)
        tokens = write_column(tokens, index, next_tokens)  # (BK, L)
        if return_attention:
            step_attention = ops.where(ops.reshape(dead, (-1, 1)), 0.0, step_attention)
            attention = write_column(attention, index, step_attention)  # (BK, L, S)
        finished = ops.logical_or(dead, ops.equal(ops.reshape(next_tokens, (batch, beam)), end_id))
        return index + 1, state, next_tokens, finished, lengths, log_probs, tokens, attention

    def row_done(index, state, inputs, finished, lengths, log_probs, *_):  # (B,)
        if complete_beam:
            return ops.all(finished, axis=1)
        return _settled(finished, lengths, log_probs, max_length, alpha)

    def keep_going(index, *rest):
        return ops.logical_and(index < max_length, ops.logical_not(ops.all(row_done(index, *rest))))

    attention_shape = (batch * beam, max_length, source_length) if return_attention else (batch * beam,)
    loop_vars = _first_loop_vars(state, batch, beam, start_id, max_length, attention_shape)
    if chunked:
        loop_vars = run_in_chunks(model, max_length, step, loop_vars, row_done,
                                  multiplicity=(beam, 1, 1, 1, beam, beam),
                                  state_multiplicity=1 if own_layout else beam, beam=True)
    else:
        loop_vars = run_in_stages(model, stages, keep_going, step, loop_vars)
    *_, lengths, log_probs, tokens, attention = loop_vars
    scores = log_probs / length_penalty_factor(lengths, alpha)  # sorted: the last top_k ranked by it
    tokens = ops.reshape(tokens, (batch, beam, max_length))
    if return_attention:
        attention = ops.reshape(attention, (batch, beam, max_length, source_length))
    return DecodeResult(tokens, scores, log_probs, lengths, attention if return_attention else None)


def _start_state(model, source_ids, length, beam, own_layout):
    """The decoding state of `B * K` hypotheses, with room for `length` tokens."""
    if own_layout:
        return model.init_beam_state(source_ids, length, beam)
    # Encode once, then give each hypothesis its own copy: row b * K + k.
    state = model.init_decoding_state(source_ids, length)
    return keras.tree.map_structure(lambda t: ops.repeat(t, beam, axis=0), state)


def _first_loop_vars(state, batch, beam, start_id, max_length, attention_shape):
    """The while loop's variables before the first step: `(index, state, inputs,
    finished, lengths, log_probs, tokens, attention)`."""
    # One live hypothesis per row to begin with; the copies start at -inf so
    # that the first step does not pick the same continuation K times.
    first = ops.equal(ops.arange(beam), 0)
    # Per-hypothesis buffers are batch-major, (B * K, ...), like the state.
    return (
        ops.convert_to_tensor(0, "int32"),
        state,
        ops.full((batch * beam,), start_id, "int32"),
        ops.zeros((batch, beam), "bool"),
        ops.zeros((batch, beam), "int32"),
        ops.broadcast_to(ops.where(first, 0.0, NEG_INF), (batch, beam)),
        ops.zeros((batch * beam, max_length), "int32"),
        ops.zeros(attention_shape, "float32"),
    )


def _settled(finished, lengths, log_probs, max_length, alpha):
    """Rows `(B,)` whose best translation can no longer change.

    A continuation only lowers a hypothesis' log-probability, and the length
    penalty is largest at `max_length`, so no descendant of an unfinished
    hypothesis scores above `log_probs / lp(max_length)`. Once a row's best
    finished hypothesis scores at least that for all its unfinished ones, its
    best stays the best (the other beam slots may still change), and decoding
    can stop when every row is settled: the best translations and their
    scores are those of decoding on until every hypothesis has finished.
    """
    scores = log_probs / length_penalty_factor(lengths, alpha)  # (B, K)
    best_finished = ops.max(ops.where(finished, scores, NEG_INF), axis=1)  # (B,)
    ceiling = log_probs / length_penalty_factor(max_length, alpha)
    best_possible = ops.max(ops.where(finished, NEG_INF, ceiling), axis=1)  # (B,)
    return ops.greater_equal(best_finished, best_possible)


def _best_continuations(logits, finished, log_probs, lengths, beam, alpha, blockwise=False):
    """The K best continuations of each row's K hypotheses, by length-penalised score.

    Args:
        logits: float32 `(B, K, V)`, padding included (its share counts in
            the normalisation; it is never a continuation).
        finished: bool `(B, K)`; `log_probs` float32 `(B, K)` so far;
            `lengths` int32 `(B, K)` tokens emitted so far; `beam` the int
            K; `alpha` GNMT's; `blockwise`: rank each hypothesis' words
            block by block (`top_k.blockwise_top_k`; faster under XLA, as
            chunked decoding runs, slower in a plain TensorFlow graph).

    Returns:
        `(best, parents, next_tokens, candidate_log_probs, new_lengths)`:
        the flat indices of the best K candidates `(B, K)`, best first; the
        hypothesis each continues `(B, K)`; their tokens int32 `(B, K)`; all
        candidates' log-probabilities `(B, K, W)`; each hypothesis' length
        after this step `(B, K)`.
    """
    batch, vocab = ops.shape(logits)[0], ops.shape(logits)[-1]
    finished_rows = ops.expand_dims(finished, -1)  # (B, K, 1)
    # Rank the K * V candidates by their length-penalised scores. Within
    # one hypothesis the log-probability so far and the length penalty
    # are shared, so its best K continuations by step log-probability are
    # the only ones of its V that can reach the overall top K: take those
    # first (B*K rows of V, not B rows of K*V), then rank the K * K. The
    # top K of the logits are those of the log-probabilities (a shift per
    # row), so the (B, K, V) log-softmax is never written out.
    # A finished hypothesis has one continuation: padding, at no cost.
    per_hypothesis = beam if isinstance(vocab, int) and vocab >= beam else None
    masked = mask_padding(logits)
    if per_hypothesis and blockwise:
        top_logits, token_ids = blockwise_top_k(masked, per_hypothesis)  # (B, K, K)
        # log P(token) = logit - logsumexp(logits), padding's share included, shifted by the largest logit:
        # the best candidate's or padding's (no pass over the vocabulary for the maximum).
        shift = ops.maximum(top_logits[..., :1], logits[..., :1])  # (B, K, 1)
        normaliser = shift + ops.log(ops.sum(ops.exp(logits - shift), axis=-1, keepdims=True))  # (B, K, 1)
    else:
        normaliser = ops.logsumexp(logits, axis=-1, keepdims=True)  # (B, K, 1), padding's share included
        if per_hypothesis:
            top_logits, token_ids = ops.top_k(masked, per_hypothesis, sorted=True)  # (B, K, K)
    if per_hypothesis:
        pad_first = ops.where(ops.equal(ops.arange(per_hypothesis), 0), 0.0, NEG_INF)  # (K,)
        step_log_probs = ops.where(finished_rows, pad_first, top_logits - normaliser)
        token_ids = ops.where(finished_rows, 0, token_ids)
    else:
        pad_only = ops.where(ops.equal(ops.arange(vocab), 0), 0.0, NEG_INF)  # (V,)
        step_log_probs = ops.where(finished_rows, pad_only, masked - normaliser)  # (B, K, V)
    candidate_log_probs = ops.expand_dims(log_probs, -1) + step_log_probs  # (B, K, K or V)
    new_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")  # (B, K)
    candidate_scores = candidate_log_probs / ops.expand_dims(length_penalty_factor(new_lengths, alpha), -1)
    width = ops.shape(candidate_scores)[-1]
    flat_scores = ops.reshape(candidate_scores, (batch, beam * width))
    _, best = ops.top_k(flat_scores, beam, sorted=True)  # (B, K), best first
    parents = best // width
    if per_hypothesis:
        next_tokens = ops.take_along_axis(ops.reshape(token_ids, (batch, -1)), best, axis=1)
    else:
        next_tokens = best % width
    next_tokens = ops.cast(next_tokens, "int32")
    return best, parents, next_tokens, candidate_log_probs, new_lengths
