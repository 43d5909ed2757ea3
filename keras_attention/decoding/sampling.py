"""Ancestral sampling with temperature, top-k and top-p (nucleus) filters."""

import tensorflow as tf
from keras import ops

from keras_attention.decoding.common import NEG_INF, argmax_last, check_common_arguments, decode_single_path
from keras_attention.decoding.options import DEFAULTS, DecodingOptions


def top_k_filter(logits, k):
    """Logits `(B, V)` with all but the `k` largest of each row set to -inf
    (ties with the k-th largest are kept)."""
    k = min(k, logits.shape[-1]) if logits.shape[-1] is not None else k
    kth_largest = ops.top_k(logits, k, sorted=True)[0][:, -1:]  # (B, 1)
    return ops.where(logits < kth_largest, NEG_INF, logits)


def top_p_filter(logits, p):
    """Logits `(B, V)` restricted to the nucleus: the fewest most likely tokens
    whose probabilities sum to at least `p` (Holtzman et al. 2019). The most
    likely token is always kept."""
    sorted_logits = ops.flip(ops.sort(logits, axis=-1), axis=-1)  # (B, V), descending
    probs = ops.softmax(sorted_logits, axis=-1)
    mass_before = ops.cumsum(probs, axis=-1) - probs  # probability of the better tokens
    keep = ops.less(mass_before, p)  # (B, V), a prefix of each row
    # The smallest kept logit is the row's threshold.
    threshold = ops.min(ops.where(keep, sorted_logits, float("inf")), axis=-1, keepdims=True)
    return ops.where(logits < threshold, NEG_INF, logits)


def sample(
    model,
    source_ids,
    start_id,
    end_id,
    max_length,
    temperature=DEFAULTS.temperature,
    top_k=DEFAULTS.top_k,
    top_p=DEFAULTS.top_p,
    seed=DEFAULTS.seed,
    return_attention=False,
):
    """Translate a batch by drawing each next token at random.

    At each step the logits are divided by `temperature`, restricted to the
    `top_k` most likely tokens, then to the nucleus of probability `top_p`
    (Holtzman et al. 2019, https://arxiv.org/abs/1904.09751), and a token is
    drawn from the softmax of what is left (Gumbel-max). Draws are
    stateless: the same integer `seed` gives the same samples, eagerly and in
    `tf.function`; under XLA (`jit_compile=True`) they are reproducible too,
    but TensorFlow's XLA random kernels give other samples than the default ones. The
    loop, stopping and padding are those of `greedy_decode`; the padding id 0
    is never drawn.

    Args:
        model: a model with `init_decoding_state` and `decode_step`.
        source_ids: int `(B, S)` source token ids, 0 for padding.
        start_id: int. The [START] token id.
        end_id: int. The [END] token id (kept in the output).
        max_length: int. Most tokens to emit.
        temperature: float > 0. Below 1 sharpens, above 1 flattens the
            distribution. Defaults to 1.
        top_k: int >= 1 or None. Keep only the k most likely tokens.
        top_p: float in (0, 1] or None. Keep only the nucleus.
        seed: int in [0, 2**31 - 1] or None. None draws a fresh seed at every call.
        return_attention: bool. Defaults to False.

    Returns:
        A `DecodeResult` shaped as greedy decoding's; `scores` and
        `log_probs` are the summed log-probabilities of the drawn tokens under
        the model itself (temperature 1, no filter).

    Example:

    >>> import keras
    >>> from keras_attention.models import Seq2SeqRNN
    >>> model = Seq2SeqRNN(30, 30, units=16, embedding_dim=8)
    >>> source = keras.ops.array([[5, 6, 7, 0]], "int32")
    >>> _ = model((source, source))  # build (or train, or load) the model first
    >>> result = sample(model, source, 1, 2, max_length=6, top_k=5, seed=3)
    >>> tuple(result.tokens.shape)
    (1, 6)
    """
    source_ids = check_common_arguments(model, source_ids, start_id, end_id, max_length)
    DecodingOptions(method="sample", temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)  # checks them

    if seed is None:  # a new seed at every run, also inside a traced graph
        base_seed = tf.random.uniform((), maxval=2**31 - 1, dtype=tf.int32)
    else:
        base_seed = tf.constant(seed, tf.int32)

    def choose(logits, index):
        logits = logits / temperature
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if top_p is not None and top_p < 1:
            logits = top_p_filter(logits, top_p)
        # Gumbel-max: argmax(logits + Gumbel noise) is a draw from softmax(logits).
        step_seed = tf.stack([base_seed, tf.cast(index, tf.int32)])  # a stream per step
        uniform = tf.random.stateless_uniform(tf.shape(logits), seed=step_seed, minval=1e-20, maxval=1.0)
        return argmax_last(logits - ops.log(-ops.log(uniform)))

    return decode_single_path(model, source_ids, start_id, end_id, max_length, choose, return_attention)
