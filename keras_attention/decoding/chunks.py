"""Decoding in compiled chunks that leave finished rows behind.

A batch decoded in one `while` loop keeps every row stepping until its
slowest row is done: in batches of 32 Multi30k sentences, beam search ran
39.5 steps a batch for translations of 12 tokens on average. Here the loop
runs a few steps at a time (`CHUNK_STEPS`, `BEAM_CHUNK_STEPS`), each chunk
one XLA program of static shapes; between chunks the rows that are done are
written to the result and dropped, the rest gathered into a batch of the next
power of two (so that a few shapes recur and compile once), and the
self-attention caches grow (16, 32, 64, ... positions) only when a chunk
needs the room. TensorFlow only: the driver is a graph with dynamic batch
sizes around XLA-compiled chunks.
"""

import math

import tensorflow as tf

# Steps a chunk runs before finished rows are dropped: beam search drops its rows (K hypotheses a sentence) more
# often, as they cost K times a greedy row's work (benchmarks/decoding.json, beam_chunks_ab). Then the cache room
# of the first chunk.
CHUNK_STEPS = 16
BEAM_CHUNK_STEPS = 8
FIRST_ROOM = 16


def chunk_rooms(model, max_length, beam=False):
    """`(stop, room)` for each chunk of a greedy decode or, with `beam`, a
    beam search: the step it runs to and the cache room it needs, doubling
    from `FIRST_ROOM` up to `max_length` (always `max_length` for a model
    without `grow_decoding_state`)."""
    steps = BEAM_CHUNK_STEPS if beam else CHUNK_STEPS
    first_room = FIRST_ROOM if hasattr(model, "grow_decoding_state") else max_length
    rooms = []
    room = min(first_room, max_length)
    for stop in range(steps, max_length + steps, steps):
        stop = min(stop, max_length)
        while room < stop:
            room = min(room * 2, max_length)
        rooms.append((stop, room))
    return rooms


def run_in_chunks(model, max_length, step, loop_vars, row_done, multiplicity, state_multiplicity, beam=False):
    """Run `step` until every row is done, in compiled chunks that drop done rows.

    Args:
        model: the decoded model (its `grow_decoding_state` grows the caches).
        max_length: int. Most steps.
        step: the loop body, `(index, state, *outputs) -> the same`.
        loop_vars: `(index, state, *outputs)`, the state with room for
            `chunk_rooms(model, max_length, beam)[0][1]` positions.
        row_done: `(index, state, *outputs) -> bool (B,)`, the rows whose
            outputs can no longer change.
        multiplicity: for each output, its rows per batch row on axis 0
            (1, or K for per-hypothesis buffers), or None for a placeholder
            that is carried as it is.
        state_multiplicity: the same for every tensor of the state.
        beam: bool. Chunks of `BEAM_CHUNK_STEPS`, not `CHUNK_STEPS`.

    Returns:
        `(index, None, *outputs)`: the outputs of every row in the original
        order (a row's values from the chunk in which it was done).
    """
    index, state, *outputs = loop_vars
    batch = tf.shape(row_done(*loop_vars))[0]
    origin = tf.range(batch)  # the batch row each current row holds
    results = list(outputs)

    def chunk(stop, index, state, *outputs):
        def keep_going(index, state, *outputs):
            return tf.logical_and(index < stop, tf.logical_not(tf.reduce_all(row_done(index, state, *outputs))))

        return tf.while_loop(keep_going, step, (index, state, *outputs))

    chunk = tf.function(chunk, jit_compile=True, autograph=False)
    rooms = chunk_rooms(model, max_length, beam)
    room = rooms[0][1]
    for number, (stop, needed) in enumerate(rooms):
        if needed > room:
            state, room = model.grow_decoding_state(state, needed), needed
        index, state, *outputs = chunk(tf.constant(stop, tf.int32), index, state, *outputs)
        results = [_scatter(r, origin, o, m) for r, o, m in zip(results, outputs, multiplicity)]
        if number == len(rooms) - 1:
            break
        select = _live_rows(row_done(index, state, *outputs))
        origin = tf.gather(origin, select)
        state = tf.nest.map_structure(lambda t: _take_rows(t, select, state_multiplicity), state)
        outputs = [o if m is None else _take_rows(o, select, m) for o, m in zip(outputs, multiplicity)]
    return (index, None, *results)


def _live_rows(done):
    """Indices of the rows not done, padded with copies of the first to a power of
    two (at most the batch); `[0]` when every row is done (a chunk of rows that are
    all done returns at once), none for an empty batch."""
    live = tf.cast(tf.where(tf.logical_not(done))[:, 0], tf.int32)
    count = tf.size(live)
    bucket = tf.minimum(tf.bitwise.left_shift(1, _ceil_log2(tf.maximum(count, 1))), tf.size(done))
    live = tf.concat([live, tf.zeros([1], tf.int32)], axis=0)[: tf.maximum(count, 1)]
    padding = tf.repeat(live[:1], tf.maximum(bucket - tf.size(live), 0))
    return tf.concat([live, padding], axis=0)[:bucket]


def _ceil_log2(count):
    return tf.cast(tf.math.ceil(tf.math.log(tf.cast(count, tf.float64)) / math.log(2.0) - 1e-9), tf.int32)


def _flat_rows(rows, multiplicity):
    """Rows `(R,)` of a batch -> their `(R * m,)` rows in a buffer with `m` rows per batch row."""
    if multiplicity == 1:
        return rows
    return tf.reshape(rows[:, None] * multiplicity + tf.range(multiplicity)[None, :], [-1])


def _take_rows(tensor, rows, multiplicity):
    return tf.gather(tensor, _flat_rows(rows, multiplicity), axis=0)


def _scatter(result, origin, current, multiplicity):
    """`result` with the rows of `current` written at their batch rows `origin`."""
    if multiplicity is None:
        return current
    where = _flat_rows(origin, multiplicity)[:, None]
    return tf.tensor_scatter_nd_update(result, where, current)
