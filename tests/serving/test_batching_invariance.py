"""Property: a sentence translates the same alone and inside any batch (Translator and SavedModel).

Batches mix the sentence with shorter and longer ones at a random position,
so its row gets padding and its neighbours differ; greedy and beam 4 must
give the same tokens as for the sentence alone. Hypothesis draws the cases
from a fixed seed, a bounded number of them.
"""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serving.conftest import EXPORTED, VALIDATION_SAMPLE

CASES = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def saved_models(signatures):
    """The reloaded `serving_default` functions of the greedy and the beam-3 export."""
    return {method: signatures[method][0] for method in EXPORTED}


def batch_around(sample, index, others, position):
    """`sample[index]` at `position` among `others`, with the sample's shortest and longest sentences."""
    by_length = sorted(sample, key=len)
    batch = [sample[i] for i in others] + [by_length[0], by_length[-1]]
    position = min(position, len(batch))
    return batch[:position] + [sample[index]] + batch[position:], position


def real_tokens(row, end_id):
    row = list(np.asarray(row))
    return row[: row.index(end_id) + 1] if end_id in row else [t for t in row if t]


cases = dict(index=st.integers(0, VALIDATION_SAMPLE - 1),
             others=st.lists(st.integers(0, VALIDATION_SAMPLE - 1), min_size=1, max_size=5),
             position=st.integers(0, 7), method=st.sampled_from(sorted(EXPORTED)))


@CASES
@given(**cases)
def test_translator(translator, validation_sample, index, others, position, method):
    batch, position = batch_around(validation_sample, index, others, position)
    end = translator.target_tokenizer.end_id
    alone = translator.translate([batch[position]], method=method, **EXPORTED[method])
    inside = translator.translate(batch, method=method, **EXPORTED[method])
    assert real_tokens(inside.tokens[position], end) == real_tokens(alone.tokens[0], end)
    assert inside.texts[position] == alone.texts[0]


@CASES
@given(**cases)
def test_saved_model(saved_models, validation_sample, index, others, position, method):
    batch, position = batch_around(validation_sample, index, others, position)
    translate = saved_models[method]
    alone = translate(sentences=tf.constant([batch[position]]))["translations"].numpy()[0]
    inside = translate(sentences=tf.constant(batch))["translations"].numpy()[position]
    assert inside == alone
