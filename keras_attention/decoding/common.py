"""What the decoders share: the result type, argument checks and the
single-path loop that greedy decoding and sampling both run.

A decoder drives any model with the step interface of `models.Transformer`
and `models.Seq2SeqRNN`:

- `state = model.init_decoding_state(source_ids, max_length)`, a nested dict
  of tensors whose axis 0 is the batch;
- `logits, state, attention = model.decode_step(state, tokens, index)`, with
  `tokens` int `(B,)` the target input at position `index` and `logits`
  `(B, V)` the distribution of the next token;
- optionally `model.decoding_constants`, the top-level state keys that
  `decode_step` passes through unchanged and that depend on the source alone
  (beam search then never reorders them);
- optionally `model.init_beam_state(source_ids, max_length, beam_size)` and
  `model.reorder_beam_state(state, parents)`, a state of `B * K` hypotheses
  in the model's own layout and its reordering by `parents` `(B, K)` (the
  slot each hypothesis continues); beam search then uses these instead of
  repeating and gathering the whole state;
- optionally `model.grow_decoding_state(state, max_length)`, the same state
  with room for `max_length` positions. The decoders then start with room
  for `FIRST_STAGE` positions and grow it to `max_length` only when a batch
  decodes past them (`decoding_stages`): a step of a short translation
  attends over `FIRST_STAGE` cached positions, not over `max_length`.

Token id 0 is padding and is never emitted: its logit is set to -inf before
a token is chosen (its probability still counts in the log-softmax, so scores
are the model's own log-probabilities).
"""

from typing import NamedTuple, Optional

import keras
from keras import ops

from keras_attention.base.validation import check_positive_int, check_rank
from keras_attention.decoding.chunks import chunk_rooms, run_in_chunks

NEG_INF = float("-inf")

# Positions a growable decoding state holds at first (then `max_length`).
FIRST_STAGE = 32


class DecodeResult(NamedTuple):
    """What `greedy_decode`, `sample` and `beam_search` return.

    `L` is always `max_length`. Tokens exclude [START], include the end token
    when one was emitted, and are 0 after it. `beam_search` adds a beam axis
    `K` after the batch axis, hypotheses sorted best first.

    Fields:
        tokens: int32 `(B, L)` or `(B, K, L)`.
        scores: float32 `(B,)` or `(B, K)`: the ranking score, the summed
            log-probabilities for greedy and sampling, the length-penalised
            score `log_probs / lp(lengths)` for beam search.
        log_probs: float32, same shape as `scores`: the summed log-probabilities
            log P(tokens | source) under the model (at temperature 1).
        lengths: int32, same shape as `scores`: tokens emitted, the end token
            included.
        attention: float32 `(B, L, S)` or `(B, K, L, S)`, or None: row `t` is
            the attention that produced token `t` (0 after the end).
    """

    tokens: keras.KerasTensor
    scores: keras.KerasTensor
    log_probs: keras.KerasTensor
    lengths: keras.KerasTensor
    attention: Optional[keras.KerasTensor] = None

    def best(self):
        """The first (best) hypothesis of a beam search result, as a
        `DecodeResult` shaped like greedy decoding's."""
        return DecodeResult(*(None if x is None else x[:, 0] for x in self))


# Argument checks ------------------------------------------------------------------


def check_common_arguments(model, source_ids, start_id, end_id, max_length):
    """Validate the arguments every decoder takes; return source ids as int32."""
    if not (hasattr(model, "init_decoding_state") and hasattr(model, "decode_step")):
        raise ValueError(
            "`model` must have `init_decoding_state` and `decode_step` methods "
            f"(for example `models.Transformer` or `models.Seq2SeqRNN`). Received: model={model!r}"
        )
    if getattr(model, "built", True) is False:
        raise ValueError(
            "`model` must be built before decoding (call it once on a batch, train "
            f"it or load it): its layers cannot create weights inside the decoding loop. Received: model={model!r}"
        )
    check_positive_int("start_id", start_id)
    check_positive_int("end_id", end_id)
    check_positive_int("max_length", max_length)
    source_ids = ops.convert_to_tensor(source_ids)
    check_rank("source_ids", source_ids.shape, (2,))
    dtype = keras.backend.standardize_dtype(source_ids.dtype)
    if "int" not in dtype:
        raise ValueError(f"`source_ids` must hold integer token ids. Received: source_ids.dtype={dtype}")
    return ops.cast(source_ids, "int32")


# Growing the decoding state ----------------------------------------------------------


def decoding_stages(model, max_length):
    """The room the decoding state gets, stage after stage, up to `max_length`.

    `[FIRST_STAGE, max_length]` for a model with `grow_decoding_state`
    (`[max_length]` when that is no more), `[max_length]` for any other.
    Each stage is one `while` loop of static shapes, so a batch of short
    translations never pays for attention over `max_length` cached
    positions. Two stages, not a doubling series: TensorFlow 2.21's XLA
    bridge fails to compile a third loop in a row
    (tensorflow/tensorflow#122886).
    """
    if not hasattr(model, "grow_decoding_state") or max_length <= FIRST_STAGE:
        return [max_length]
    return [FIRST_STAGE, max_length]


def run_in_stages(model, stages, keep_going, step, loop_vars):
    """`ops.while_loop(keep_going, step, loop_vars)` stage by stage.

    `loop_vars` are `(index, state, ...)`; each stage's loop runs while
    `index < stage` and `keep_going(*loop_vars)`, and the state grows to the
    next stage's room in between (a stage whose batch has finished exits at
    once).
    """
    for i, stage in enumerate(stages):
        if i:
            loop_vars = (loop_vars[0], model.grow_decoding_state(loop_vars[1], stage)) + tuple(loop_vars[2:])

        def within(index, *rest, stage=stage):
            return ops.logical_and(index < stage, keep_going(index, *rest))

        loop_vars = ops.while_loop(within, step, loop_vars)
    return loop_vars


# Small tensor helpers -------------------------------------------------------------


def argmax_last(x):
    """int32 index of the largest value along `x`'s last axis, the first one on ties.

    On TensorFlow its own `ArgMax`, one pass over `x`: Keras' `ops.argmax`
    adds four more (B, V) passes a step to rank -0.0 below 0.0, a tie between
    logits that decoding does not meet.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.argmax(x, axis=-1, output_type=tf.int32)
    return ops.cast(ops.argmax(x, axis=-1), "int32")


def mask_padding(logits):
    """Logits `(..., V)` with the padding id 0 set to -inf."""
    vocab = ops.shape(logits)[-1]
    is_pad = ops.equal(ops.arange(vocab), 0)
    return ops.where(is_pad, ops.cast(NEG_INF, logits.dtype), logits)


def write_column(buffer, index, values):
    """`buffer[:, index] = values` for `buffer` `(B, L, ...)` and `values` `(B, ...)`.

    A masked select rather than a scatter: it keeps static shapes (XLA) and
    works for an empty batch.
    """
    length = ops.shape(buffer)[1]
    hit = ops.equal(ops.arange(length), index)  # (L,)
    hit = ops.reshape(hit, (1, length) + (1,) * (len(buffer.shape) - 2))
    return ops.where(hit, ops.expand_dims(ops.cast(values, buffer.dtype), 1), buffer)


def check_attention(attention, return_attention):
    """The step's attention `(B, S)` as float32, or an error if it is missing."""
    if not return_attention:
        return None
    if attention is None:
        raise ValueError(
            "`return_attention=True` needs a model whose `decode_step` returns "
            "attention weights; this one returns None. Received: return_attention=True"
        )
    return ops.cast(attention, "float32")


# The single-path loop (greedy decoding and sampling) ------------------------------------


def decode_single_path(model, source_ids, start_id, end_id, max_length, choose, return_attention, chunked=False):
    """Feed one token a step, choosing each with `choose(logits, index)`.

    Args:
        model: a model with `init_decoding_state` and `decode_step`.
        source_ids: int32 `(B, S)`, already checked.
        start_id, end_id, max_length: ints, already checked.
        choose: `(logits (B, V) with padding at -inf, index) -> int (B,)`.
        return_attention: bool.
        chunked: bool. Run in XLA-compiled chunks that drop finished rows
            (`decoding.chunks`; TensorFlow graphs only).

    Returns:
        A `DecodeResult` with `scores` equal to `log_probs`.
    """
    rows = ops.shape(source_ids)[0]
    stages = decoding_stages(model, max_length)
    if chunked:
        stages = [chunk_rooms(model, max_length)[0][1]]
    state = model.init_decoding_state(source_ids, stages[0])

    def step(index, state, inputs, finished, tokens, log_probs, attention):
        logits, state, step_attention = model.decode_step(state, inputs, index)
        logits = ops.cast(logits, "float32")  # (B, V)
        next_tokens = ops.cast(choose(mask_padding(logits), index), "int32")
        next_tokens = ops.where(finished, 0, next_tokens)  # finished rows only pad
        token_log_probs = ops.take_along_axis(
            ops.log_softmax(logits, axis=-1), ops.expand_dims(next_tokens, -1), axis=-1
        )[:, 0]  # (B,): the model's log-probability, padding's share included
        log_probs = log_probs + ops.where(finished, 0.0, token_log_probs)
        tokens = write_column(tokens, index, next_tokens)
        if return_attention:
            step_attention = check_attention(step_attention, True)
            step_attention = ops.where(ops.expand_dims(finished, -1), 0.0, step_attention)
            attention = write_column(attention, index, step_attention)
        finished = ops.logical_or(finished, ops.equal(next_tokens, end_id))
        return index + 1, state, next_tokens, finished, tokens, log_probs, attention

    def keep_going(index, state, inputs, finished, *_):
        return ops.logical_and(index < max_length, ops.logical_not(ops.all(finished)))

    # Attention rows are only carried when asked for (a scalar placeholder otherwise).
    attention_shape = (rows, max_length, ops.shape(source_ids)[1]) if return_attention else ()
    loop_vars = (
        ops.convert_to_tensor(0, "int32"),
        state,
        ops.full((rows,), start_id, "int32"),
        ops.zeros((rows,), "bool"),
        ops.zeros((rows, max_length), "int32"),
        ops.zeros((rows,), "float32"),
        ops.zeros(attention_shape, "float32"),
    )
    if chunked:
        finished_rows = lambda index, state, inputs, finished, *_: finished  # noqa: E731
        loop_vars = run_in_chunks(model, max_length, step, loop_vars, finished_rows,
                                  multiplicity=(1, 1, 1, 1, 1 if return_attention else None),
                                  state_multiplicity=1)
    else:
        loop_vars = run_in_stages(model, stages, keep_going, step, loop_vars)
    *_, tokens, log_probs, attention = loop_vars
    attention = attention if return_attention else None
    lengths = ops.sum(ops.cast(ops.not_equal(tokens, 0), "int32"), axis=-1)
    return DecodeResult(tokens, log_probs, log_probs, lengths, attention)
