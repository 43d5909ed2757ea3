"""The decoding interface without a cache: re-run the whole prefix each step."""

from keras import ops

from keras_attention.decoding.common import write_column


class UncachedDecoder:
    """Wraps a model so that every decoding step re-runs the full decoder.

    What the TensorFlow Transformer tutorial does: the state holds the source
    and a `(B, max_length)` buffer of the tokens fed so far; `decode_step`
    writes the new token at `index`, runs the teacher-forced model on the whole
    buffer and keeps the logits at `index` (the causal mask hides the empty
    positions after it). Step t costs a pass over t tokens, and the encoder
    runs again at every step, so decoding L tokens costs O(L^2) decoder
    positions instead of O(L). It exists as the reference the cached decoders
    are tested against and as the baseline of the decoding benchmark.

    Args:
        model: a model called as `model((source_ids, target_in))` that returns
            logits `(B, T, V)`, position t depending on `target_in[:, :t+1]`.

    Example:

    >>> import keras
    >>> from keras_attention.decoding import greedy_decode
    >>> from keras_attention.models import Transformer
    >>> model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)
    >>> source = keras.ops.array([[5, 6, 7, 0]], "int32")
    >>> _ = model((source, source))  # build (or train, or load) the model first
    >>> slow = greedy_decode(UncachedDecoder(model), source, 1, 2, max_length=6)
    >>> fast = greedy_decode(model, source, 1, 2, max_length=6)
    >>> bool(keras.ops.all(slow.tokens == fast.tokens))
    True
    """

    def __init__(self, model):
        self.model = model

    @property
    def built(self):
        return self.model.built

    decoding_constants = ("source_ids",)

    def init_decoding_state(self, source_ids, max_length):
        """`{"source_ids": (B, S), "target_in": (B, max_length)}`, batch-major."""
        batch = ops.shape(source_ids)[0]
        return {"source_ids": source_ids, "target_in": ops.zeros((batch, max_length), "int32")}

    def decode_step(self, state, tokens, index):
        """Returns `(logits (B, V), new_state, None)`: no attention weights."""
        target_in = write_column(state["target_in"], index, tokens)  # (B, max_length)
        logits = self.model((state["source_ids"], target_in), training=False)  # (B, T, V)
        step_logits = ops.take(logits, index, axis=1)  # (B, V)
        return step_logits, {"source_ids": state["source_ids"], "target_in": target_in}, None
