"""A toy model with exact NumPy references, and small real models, for the decoding tests.

The toy model's next-token logits depend on the position, the previous token,
the running sum of every fed token (mod 3, carried in the state, so a beam
search that reorders its state wrongly gives wrong numbers) and the first
source token. Its "attention" is a one-hot row that also depends on the
carried sum. Everything can be recomputed from the prefix in NumPy.
"""

import itertools

import keras
import numpy as np

from keras import ops

from keras_attention.models import Seq2SeqRNN, Transformer

PAD, START, END = 0, 1, 2
MOD = 3  # the carried state: sum of fed tokens mod MOD
SOURCE_VOCAB = 10


class ToyModel:
    """Implements `init_decoding_state` / `decode_step` from fixed tables."""

    def __init__(self, vocab=5, max_length=6, seed=0, scale=1.5, end_bias=0.0):
        rng = np.random.default_rng(seed)
        self.vocab = vocab
        self.table = rng.normal(0, scale, size=(max_length, vocab, MOD, vocab)).astype("float32")
        self.table[..., END] += end_bias
        self.source_bias = rng.normal(0, scale, size=(SOURCE_VOCAB, vocab)).astype("float32")
        self.calls = 0  # decode_step calls (Python calls: one per step when eager)

    # The interface, in keras.ops --------------------------------------------

    def init_decoding_state(self, source_ids, max_length):
        batch, length = ops.shape(source_ids)[0], ops.shape(source_ids)[1]
        bias = ops.take(ops.convert_to_tensor(self.source_bias), source_ids[:, 0], axis=0)  # (B, V)
        positions = ops.broadcast_to(ops.arange(length, dtype="int32"), (batch, length))
        return {"bias": bias, "carry": (ops.zeros((batch,), "int32"), positions)}

    def decode_step(self, state, tokens, index):
        self.calls += 1
        acc, positions = state["carry"]
        acc = (acc + tokens) % MOD  # (B,)
        index = ops.cast(index, "int32")
        flat = (index * self.vocab + tokens) * MOD + acc  # row of the flattened table
        rows = ops.reshape(ops.convert_to_tensor(self.table), (-1, self.vocab))
        logits = ops.take(rows, flat, axis=0) + state["bias"]  # (B, V)
        source_length = ops.shape(positions)[1]
        hot = ops.expand_dims((index + acc) % source_length, 1)  # (B, 1)
        attention = ops.cast(ops.equal(positions, hot), "float32")  # (B, S)
        return logits, {"bias": state["bias"], "carry": (acc, positions)}, attention

    # NumPy references -----------------------------------------------------------

    def np_step(self, source_row, prefix):
        """Log-softmax `(V,)` (float64) and attention `(S,)` after feeding
        `prefix` (which starts with [START])."""
        t, acc = len(prefix) - 1, sum(prefix) % MOD
        logits = self.table[t, prefix[-1], acc].astype("float64") + self.source_bias[source_row[0]]
        log_probs = logits - np.logaddexp.reduce(logits)
        attention = np.eye(len(source_row))[(t + acc) % len(source_row)]
        return log_probs, attention


def lp(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def np_greedy(toy, source, max_length):
    """Tokens `(B, L)` and summed log-probs `(B,)` of an arg-max loop."""
    tokens, scores = np.zeros((len(source), max_length), "int64"), np.zeros(len(source))
    for b, row in enumerate(source):
        prefix = [START]
        for t in range(max_length):
            log_probs, _ = toy.np_step(row, prefix)
            token = 1 + int(np.argmax(log_probs[1:]))  # never the padding id
            tokens[b, t], scores[b] = token, scores[b] + log_probs[token]
            prefix.append(token)
            if token == END:
                break
    return tokens, scores


def np_all_hypotheses(toy, row, max_length, alpha):
    """Every possible output, as (score, log_prob, tokens), best first: the
    sequences that end with END, and the unfinished ones of `max_length`."""
    hypotheses = []
    for length in range(1, max_length + 1):
        for tokens in itertools.product(range(1, toy.vocab), repeat=length):
            if END in tokens[:-1] or (tokens[-1] != END and length < max_length):
                continue
            prefix, log_prob = [START], 0.0
            for token in tokens:
                log_prob += toy.np_step(row, prefix)[0][token]
                prefix.append(token)
            hypotheses.append((log_prob / lp(length, alpha), log_prob, list(tokens)))
    return sorted(hypotheses, key=lambda h: -h[0])


def np_beam(toy, row, max_length, beam_size, alpha):
    """A plain-Python beam search with the same rules (finished hypotheses
    stay in the beam with their score): (score, log_prob, tokens), best first."""
    beams = [([], 0.0, False)]
    for _ in range(max_length):
        candidates = []
        for tokens, log_prob, finished in beams:
            if finished:
                candidates.append((tokens, log_prob, True))
                continue
            log_probs, _ = toy.np_step(row, [START] + tokens)
            for token in range(1, toy.vocab):
                candidates.append((tokens + [token], log_prob + log_probs[token], token == END))
        candidates.sort(key=lambda c: -c[1] / lp(len(c[0]), alpha))
        beams = candidates[:beam_size]
        if all(finished for _, _, finished in beams):
            break
    return [(log_prob / lp(len(tokens), alpha), log_prob, tokens) for tokens, log_prob, _ in beams]


def pad_to(tokens, length):
    return list(tokens) + [0] * (length - len(tokens))


def toy_source(batch=3, length=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, SOURCE_VOCAB, size=(batch, length)).astype("int32")


# Real models --------------------------------------------------------------------------

VOCAB = 30
REAL_MODELS = ["transformer_post", "transformer_pre", "rnn_none", "rnn_bahdanau", "rnn_luong"]


def build_real_model(name, seed=0):
    """A tiny random-initialised model, built by one call."""
    keras.utils.set_random_seed(seed)
    if name.startswith("transformer"):
        model = Transformer(
            VOCAB, VOCAB, num_layers=2, d_model=16, num_heads=2, intermediate_dim=32,
            max_length=32, normalize_first=name.endswith("pre"), tie_output=False,
        )
    else:
        attention = name.split("_")[1]
        model = Seq2SeqRNN(
            VOCAB, VOCAB, attention=None if attention == "none" else attention,
            units=16, embedding_dim=8, attention_units=8,
        )
    source = real_source()
    model((source, source))
    return model


def real_source(seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(3, VOCAB, size=(3, 6)).astype("int32")
    source[1, 4:] = 0  # a padded row
    return source


def teacher_forced(model, source, tokens):
    """Per-token log-probs `(B, L)` and attention `(B, L, S)` (None for an
    RNN without attention) of the full pass on `[START] + tokens[:-1]`."""
    target_in = np.concatenate([np.full((len(tokens), 1), START), tokens[:, :-1]], 1).astype("int32")
    if isinstance(model, Transformer):
        encoded, mask = model.encode(source)
        logits, scores = model.decode(target_in, encoded, mask, return_attention=True)
        attention = ops.mean(scores, axis=1)  # (B, L, S)
    else:
        logits, attention = model((source, target_in), return_attention=True)
    log_probs = ops.take_along_axis(ops.log_softmax(logits, -1), ops.expand_dims(tokens, -1), -1)[..., 0]
    log_probs = np.where(tokens > 0, ops.convert_to_numpy(log_probs), 0.0)
    return log_probs, None if attention is None else ops.convert_to_numpy(attention)
