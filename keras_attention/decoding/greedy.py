"""Greedy decoding: the most likely next token at every step."""

from keras_attention.decoding.common import argmax_last, check_common_arguments, decode_single_path


def greedy_decode(model, source_ids, start_id, end_id, max_length, return_attention=False, chunked=False):
    """Translate a batch by always taking the most likely next token.

    The encoder runs once; then each step feeds the previous token to
    `model.decode_step` (one cached step, not a re-run of the prefix) and
    takes the arg-max of the logits. A row stops at `end_id` (kept in the
    output) and is 0-padded afterwards; the loop is a graph `while` loop that
    ends when every row has finished or `max_length` tokens were emitted, so
    it traces once inside `tf.function` whatever the batch size and length.
    The padding id 0 is never emitted.

    Args:
        model: a model with `init_decoding_state(source_ids, max_length)` and
            `decode_step(state, tokens, index)`, such as `models.Transformer`
            or `models.Seq2SeqRNN` (or an `UncachedDecoder`).
        source_ids: int `(B, S)` source token ids, 0 for padding.
        start_id: int. The [START] token id fed at position 0.
        end_id: int. The [END] token id.
        max_length: int. Most tokens to emit (the end token included).
        return_attention: bool. Also return the attention of every step.
            Defaults to False.
        chunked: bool. Decode in XLA-compiled chunks of steps that leave
            finished rows behind (`keras_attention.decoding.chunks`): the
            same translations, less work for batches of mixed lengths.
            TensorFlow graphs only (inside `tf.function`). Defaults to False.

    Returns:
        A `DecodeResult`: `tokens` int32 `(B, max_length)`, `scores` and
        `log_probs` float32 `(B,)` (both the summed log-probabilities of the
        emitted tokens), `lengths` int32 `(B,)` and `attention` float32
        `(B, max_length, S)` or None.

    Example:

    >>> import keras
    >>> from keras_attention.models import Transformer
    >>> model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)
    >>> source = keras.ops.array([[5, 6, 7, 0]], "int32")
    >>> _ = model((source, source))  # build (or train, or load) the model first
    >>> result = greedy_decode(model, source, start_id=1, end_id=2, max_length=6)
    >>> tuple(result.tokens.shape), tuple(result.scores.shape)
    ((1, 6), (1,))
    """
    source_ids = check_common_arguments(model, source_ids, start_id, end_id, max_length)

    def choose(logits, index):
        return argmax_last(logits)  # (B,)

    return decode_single_path(model, source_ids, start_id, end_id, max_length, choose, return_attention,
                              chunked=chunked)
