"""scripts/profile_decoding.py: op names to categories, and a profiled loop read back from the trace."""

import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import profile_decoding  # noqa: E402

LOOP = "StatefulPartitionedCall/while/body/_145/while/"


@pytest.mark.parametrize("name, op_type, category", [
    ("while/body/_1/while/decoder_1_1/self_attention_1/query_1/MatMul", "_MklBatchMatMulV2", "self-attention"),
    (LOOP + "decoder_0_1/cross_attention_1/einsum/Einsum", "_MklEinsum", "cross-attention"),
    (LOOP + "decoder_0_1/self_attention_1/XlaDynamicUpdateSlice", "XlaDynamicUpdateSlice", "cache updates"),
    (LOOP + "decoder_0_1/feedforward_intermediate/Tensordot/MatMul", "_MklMatMul", "feed-forward"),
    (LOOP + "decoder_0_1/cross_attention_norm/moments/mean", "Mean", "layer norm"),
    (LOOP + "output_projection/MatMul", "BatchMatMulV2", "output projection"),
    (LOOP + "target_embedding/token_embedding/GatherV2", "GatherV2", "embedding"),
    (LOOP + "ReduceLogSumExp/Exp", "Exp", "log-softmax"),
    (LOOP + "TopKV2", "TopKV2", "search"),
    # Names as the traces of `Translator` and of its SavedModel give them.
    ("encoder_0_1/self_attention_1/query_1/MatMul", "_MklBatchMatMulV2", "encoder"),  # not the decoder's
    ("StatefulPartitionedCall/encoder_1_1/feedforward_norm_1/mul", "Mul", "encoder"),
    ("key_1/einsum/Einsum", "_MklEinsum", "cross-attention"),  # the source's keys, once before the loop
    ("StatefulPartitionedCall/value_1/einsum/Einsum", "_MklEinsum", "cross-attention"),
    ("while/body/_1/while/LogSoftmax", "LogSoftmax", "log-softmax"),  # greedy's
    ("while/body/_1/while/ArgMax", "ArgMax", "search"),
    ("WordpieceTokenizeWithOffsets", "WordpieceTokenizeWithOffsets", "tokenization"),
    ("Shape", "Shape", "other"),
])
def test_categories_of_op_names(name, op_type, category):
    assert profile_decoding.categorize(name, op_type) == category


def test_busy_time_counts_overlaps_once():
    events = [("a", "T", 0, 0, 10), ("b", "T", 1, 5, 15), ("c", "T", 0, 20, 30), ("d", "T", 1, 22, 24)]
    assert profile_decoding.busy_time(events) == 25


def test_a_profiled_loop_splits_into_its_categories():
    """A loop of a scoped product and a top-k, profiled: both categories get time, and the figures add up."""
    weights = tf.constant(np.random.default_rng(0).normal(size=(64, 64)).astype("float32"))

    @tf.function
    def loop(x):
        def body(i, x):
            with tf.name_scope("decoder_0"), tf.name_scope("self_attention"):
                x = tf.tanh(tf.matmul(x, weights))
            _, top = tf.math.top_k(x, k=4)
            return i + 1, x + tf.cast(top[:, :1], x.dtype) * 0.0
        return tf.while_loop(lambda i, x: i < 20, body, (0, x))[1]

    decode = lambda chunk: loop(tf.ones([len(chunk), 64]))  # noqa: E731
    row = profile_decoding.profile(decode, ["a sentence"] * 8, batch=4, tokens=40)
    categories = row["categories_ms_per_token"]
    assert set(categories) == set(profile_decoding.CATEGORIES)
    assert categories["self-attention"] > 0 and categories["search"] > 0
    assert categories["tokenization"] == categories["cross-attention"] == 0
    busy = row["wall_ms_per_token"] - row["idle_ms_per_token"]
    assert 0 < busy <= row["wall_ms_per_token"] and row["target_tokens"] == 40
