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
    auto_bucket_boundaries,
    load_parallel_files,
    write_prepared_corpus,
)
from keras_attention.data.prepared import read_records

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
    manifest = write_prepared_corpus(pairs, tok, tok, str(out), max_length=18, shard_size=700, seed=3,
                                     report=report, valid_pairs=pairs.take(5))
    # Every line's ids, tokenized in one batch a side (line by line is minutes of eager calls).
    ids = [[tuple(row) for row in tok.tokenize(lines).to_list()] for lines in (source, target)]
    return dict(folder=out, manifest=manifest, source=source, target=target, tok=tok, ids=list(zip(*ids)))


def expected_pairs(corpus):
    """The kept pairs as id tuples, worked out in Python from the tokenizer alone."""
    kept = collections.Counter()
    for s, t, (x, y) in zip(corpus["source"], corpus["target"], corpus["ids"]):
        if not s.strip() or not t.strip():
            continue
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
    for i, pair in enumerate(corpus["ids"]):
        position.setdefault(pair, i)
    order = [position[(tuple(x), tuple(y))] for x, y in first[:50]]
    assert order != sorted(order)


@pytest.mark.parametrize("batching", [dict(batch_size=7), dict(batch_tokens=150),
                                      dict(batch_tokens=150, bucket_method="min_padding")])
def test_steps_per_epoch_is_exact_and_batches_hold_the_pairs(corpus, batching):
    prepared = PreparedCorpus(corpus["folder"])
    ds = prepared.dataset(**batching, shuffle=True, seed=1)
    batches = list(ds.as_numpy_iterator())
    assert len(batches) == prepared.steps_per_epoch(**batching)
    (x, y_in), y_out = batches[0]
    assert (x[:, 0] == corpus["tok"].start_id).all() and (y_in[:, 0] == corpus["tok"].start_id).all()
    if "batch_tokens" in batching:
        assert all(b[0][0].size <= 150 for b in batches)


def test_min_padding_boundaries_from_the_manifest_are_those_of_every_length(corpus):
    prepared = PreparedCorpus(corpus["folder"])
    lengths = [max(len(x) + 2, len(y) + 1) for (x, y), n in expected_pairs(corpus).items() for _ in range(n)]
    for method in ("equal_count", "min_padding"):
        assert prepared.bucket_boundaries(4, method=method) == auto_bucket_boundaries(lengths, 4, method=method)


def test_one_pair_a_batch_gives_back_every_pair(corpus):
    prepared = PreparedCorpus(corpus["folder"])
    found = collections.Counter()
    for (x, _), y_out in prepared.dataset(batch_size=1, pad_to_bucket_boundary=False).as_numpy_iterator():
        found[(tuple(x[0, 1:-1]), tuple(y_out[0, :-1]))] += 1
    assert found == expected_pairs(corpus)


def test_folder_checks(corpus, tmp_path):
    with pytest.raises(ValueError, match="already holds a prepared corpus"):
        write_prepared_corpus(None, corpus["tok"], corpus["tok"], str(corpus["folder"]), max_length=18,
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


def test_overwrite_replaces_a_corpus_only_once_the_new_one_is_complete(corpus, tmp_path):
    import tensorflow as tf

    folder = tmp_path / "mine"
    words = tf.data.Dataset.from_tensor_slices((["a dog"] * 50, ["the cat"] * 50))
    write_prepared_corpus(words, corpus["tok"], corpus["tok"], folder, max_length=18, num_pairs=50)
    before = {name: (folder / name).read_bytes() for name in os.listdir(folder)}

    def fails_half_way(index, pair):
        tf.debugging.assert_less(index, tf.constant(30, tf.int64), message="the source broke")
        return pair

    broken = tf.data.Dataset.from_tensor_slices((["a cat"] * 60, ["the dog"] * 60)).enumerate().map(
        lambda i, pair: fails_half_way(i, pair))
    with pytest.raises(tf.errors.InvalidArgumentError, match="the source broke"):
        write_prepared_corpus(broken, corpus["tok"], corpus["tok"], folder, max_length=18, num_pairs=60,
                              overwrite=True)
    assert {name: (folder / name).read_bytes() for name in os.listdir(folder)} == before
    assert sorted(os.listdir(tmp_path)) == ["mine"]  # no staging folder left behind
    assert PreparedCorpus(folder).num_pairs == 50

    good = tf.data.Dataset.from_tensor_slices((["a cat"] * 60, ["the dog"] * 60))
    write_prepared_corpus(good, corpus["tok"], corpus["tok"], folder, max_length=18, num_pairs=60, overwrite=True)
    assert PreparedCorpus(folder).num_pairs == 60
    assert sorted(os.listdir(tmp_path)) == ["mine"]


@pytest.fixture(scope="module")
def two_worker_reads(corpus, tmp_path_factory):
    """What each of two worker processes on 127.0.0.1 (MultiWorkerMirroredStrategy) reads in one epoch of the
    corpus ("corpus") and of a corpus of a single shard ("one_shard"): for each, its folder, and the rows and the
    results of each worker. One pair of processes reads both in turn (each process starts TensorFlow, about 5 s)."""
    import tensorflow as tf

    from tests.training import subprocesses

    tmp_path = tmp_path_factory.mktemp("two_workers")
    one_shard = tmp_path / "one_shard"
    pairs = [(" ".join(corpus["source"][i:i + 3]), corpus["target"][i]) for i in range(400)]
    dataset = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*pairs))))
    write_prepared_corpus(dataset, corpus["tok"], corpus["tok"], str(one_shard), max_length=64, num_pairs=400,
                          shard_size=1000, seed=0)
    folders = {"corpus": corpus["folder"], "one_shard": one_shard}
    worker = os.path.join(subprocesses.HERE, "distributed_worker.py")
    processes = []
    try:
        processes += subprocesses.start_workers(
            2, lambda index: [worker, "shards", str(tmp_path / f"w{index}.json"), *map(str, folders.values())],
            tmp_path)
        codes = subprocesses.finish(processes, timeout=600)
    finally:
        for p in processes:
            subprocesses.kill(p)
    assert codes == [0, 0], subprocesses.logs(processes)
    by_worker = [json.loads((tmp_path / f"w{index}.json").read_text()) for index in range(2)]
    reads = {}
    for name, results in zip(folders, zip(*by_worker)):  # each folder's results, one a worker
        for result in results:
            assert result["replicas"] == 2
            assert all(size in (0, 4) for size in result["sizes"])  # global batch 8 over 2 replicas
            assert len(result["sizes"]) == result["steps"]  # one replica a worker
        reads[name] = {"folder": folders[name], "results": list(results),
                       "rows": [[tuple(row) for row in result["rows"]] for result in results]}
    return reads


def shard_index(folder):
    """The source rows (with [START] and [END]) of each shard, read without the dataset code."""
    manifest = json.loads((folder / "manifest.json").read_text())
    return [collections.Counter((2, *map(int, x), 3) for x, _ in
                                read_records(os.path.join(folder, shard["file"]), manifest["dtype"]))
            for shard in manifest["shards"]]


@pytest.mark.xdist_group("two_worker_reads")  # one worker: the worker processes start once
def test_two_workers_read_disjoint_shards(corpus, two_worker_reads):
    rows, results = two_worker_reads["corpus"]["rows"], two_worker_reads["corpus"]["results"]
    shards = shard_index(corpus["folder"])
    only_in = {row: i for i, rows_i in enumerate(shards) for row in rows_i
               if sum(row in other for other in shards) == 1}  # rows found in one shard only
    seen = [{only_in[row] for row in worker_rows if row in only_in} for worker_rows in rows]
    assert seen == [{0, 2, 4}, {1, 3}]  # worker i reads shards i, i + 2, ...
    # Each worker reads all of its shards (less the bucket remainders) within one epoch.
    for worker_rows, shards in zip(rows, seen):
        held = sum(corpus["manifest"]["shards"][i]["pairs"] for i in shards)
        assert held - 8 * 8 < len(worker_rows) <= held  # at most 7 dropped in each of <= 8 buckets
    # The worker with fewer shards runs dry first; `steps_per_epoch` stops there, so in a
    # repeated epoch no worker is ever handed an empty batch.
    expected = results[0]["expected_steps"]
    first_empty = [next((i for i, n in enumerate(r["sizes"]) if n == 0), len(r["sizes"])) for r in results]
    assert expected == min(first_empty), (expected, first_empty)


@pytest.mark.xdist_group("two_worker_reads")  # one worker: the worker processes start once
def test_two_workers_split_each_batch_of_a_single_shard(two_worker_reads):
    read = two_worker_reads["one_shard"]
    rows, results = read["rows"], read["results"]
    (everything,) = shard_index(read["folder"])
    assert collections.Counter(rows[0]) + collections.Counter(rows[1]) <= everything  # no pair twice
    # Both workers hold data for each step: a step is one batch, half on each worker.
    assert results[0]["steps"] == results[1]["steps"] == results[0]["expected_steps"]
    assert len(rows[0]) == len(rows[1]) == 4 * results[0]["expected_steps"]
