"""Prepared corpora: every kept pair in exactly one shard, shuffled, exact step counts, checked folders."""

import collections
import json
import os

import numpy as np
import pytest

from keras_attention.data import (
    CorpusReport,
    PreparedCorpus,
    SubwordTokenizer,
    load_parallel_files,
    prepare_corpus,
)
from keras_attention.data.records import read_records

WORDS = ["a", "dog", "cat", "runs", "sleeps", "the", "big", "small", "red", "house"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A 3,000-pair corpus with one empty line, its tokenizers and a prepared folder."""
    folder = tmp_path_factory.mktemp("records")
    rng = np.random.default_rng(0)
    source = [" ".join(rng.choice(WORDS, rng.integers(1, 20))) for _ in range(3000)]
    target = [" ".join(rng.choice(WORDS, rng.integers(1, 20))).upper() for _ in range(3000)]
    source[10] = ""
    (folder / "c.en").write_text("\n".join(source) + "\n")
    (folder / "c.de").write_text("\n".join(target) + "\n")
    vocabulary = ["[PAD]", "[UNK]", "[START]", "[END]"] + sorted(set(WORDS + [w.upper() for w in WORDS]))
    tok = SubwordTokenizer(vocabulary)
    report = CorpusReport()
    pairs = load_parallel_files(str(folder / "c.en"), str(folder / "c.de"), report=report)
    out = folder / "prepared"
    manifest = prepare_corpus(pairs, tok, tok, str(out), max_length=18, shard_size=700, seed=3,
                              report=report, valid_pairs=pairs.take(5))
    return dict(folder=out, manifest=manifest, source=source, target=target, tok=tok)


def expected_pairs(corpus):
    """The kept pairs as id tuples, worked out in Python from the tokenizer alone."""
    kept = collections.Counter()
    for s, t in zip(corpus["source"], corpus["target"]):
        if not s.strip() or not t.strip():
            continue
        x = tuple(corpus["tok"].tokenize(s).numpy())
        y = tuple(corpus["tok"].tokenize(t).numpy())
        if len(x) + 2 <= 18 and len(y) + 1 <= 18:
            kept[(x, y)] += 1
    return kept


def test_every_kept_pair_is_in_exactly_one_shard(corpus):
    manifest = corpus["manifest"]
    assert len(manifest["shards"]) == 5  # ceil(3000 / 700)
    found = collections.Counter()
    for shard in manifest["shards"]:
        records = read_records(os.path.join(corpus["folder"], shard["file"]), manifest["dtype"])
        assert len(records) == shard["pairs"]
        found.update((tuple(x), tuple(y)) for x, y in records)
    expected = expected_pairs(corpus)
    assert found == expected
    assert manifest["pairs"] == sum(expected.values())
    counts = manifest["counts"]
    assert counts["empty"] == 1 and counts["read"] == 3000
    assert counts["too_long_tokens"] == 2999 - manifest["pairs"]


def test_shards_are_shuffled(corpus):
    first = read_records(os.path.join(corpus["folder"], corpus["manifest"]["shards"][0]["file"]),
                         corpus["manifest"]["dtype"])
    order = []  # positions in the corpus of the shard's records, which must not be increasing
    position = {}
    for i, (s, t) in enumerate(zip(corpus["source"], corpus["target"])):
        position.setdefault((tuple(corpus["tok"].tokenize(s).numpy()),
                             tuple(corpus["tok"].tokenize(t).numpy())), i)
    order = [position[(tuple(x), tuple(y))] for x, y in first[:50]]
    assert order != sorted(order)


@pytest.mark.parametrize("batching", [dict(batch_size=7), dict(batch_tokens=150)])
def test_steps_per_epoch_is_exact_and_batches_hold_the_pairs(corpus, batching):
    prepared = PreparedCorpus(corpus["folder"])
    ds = prepared.dataset(**batching, shuffle=True, seed=1)
    batches = list(ds.as_numpy_iterator())
    assert len(batches) == prepared.steps_per_epoch(**batching)
    (x, y_in), y_out = batches[0]
    assert (x[:, 0] == corpus["tok"].start_id).all() and (y_in[:, 0] == corpus["tok"].start_id).all()
    if "batch_tokens" in batching:
        assert all(b[0][0].size <= 150 for b in batches)


def test_one_pair_a_batch_gives_back_every_pair(corpus):
    prepared = PreparedCorpus(corpus["folder"])
    found = collections.Counter()
    for (x, _), y_out in prepared.dataset(batch_size=1, pad_to_bucket_boundary=False).as_numpy_iterator():
        found[(tuple(x[0, 1:-1]), tuple(y_out[0, :-1]))] += 1
    assert found == expected_pairs(corpus)


def test_folder_checks(corpus, tmp_path):
    with pytest.raises(ValueError, match="already holds a prepared corpus"):
        prepare_corpus(None, corpus["tok"], corpus["tok"], str(corpus["folder"]), max_length=18,
                       num_pairs=1)
    with pytest.raises(ValueError, match="not a prepared corpus"):
        PreparedCorpus(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in os.listdir(corpus["folder"]):
        (copy / name).write_bytes((corpus["folder"] / name).read_bytes())
    (copy / "target.vocab").write_text("[PAD]\n")
    with pytest.raises(ValueError, match="target.vocab: its SHA-256 differs"):
        PreparedCorpus(copy)
    (copy / "target.vocab").write_bytes((corpus["folder"] / "target.vocab").read_bytes())
    os.remove(copy / corpus["manifest"]["shards"][2]["file"])
    with pytest.raises(ValueError, match="train-00002-of-00005.tfrecord: missing shard"):
        PreparedCorpus(copy)
    (copy / "manifest.json").write_text("{broken")
    with pytest.raises(ValueError, match="manifest.json: not valid JSON"):
        PreparedCorpus(copy)
    assert json.loads((corpus["folder"] / "manifest.json").read_text())["valid"] == [
        "valid.source", "valid.target"]
