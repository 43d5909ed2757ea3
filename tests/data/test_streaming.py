"""Streaming parallel text: shards, globs, gzip, line-count checks, skipping, counting, strict errors."""

import gzip
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import CorpusReport, corpus_error, count_lines, load_parallel_files
from keras_attention.data.vocabulary import build_vocabulary, spread_sample


def write(path, lines, compress=False, ending="\n"):
    data = "".join(line + ending for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if compress else data)
    return str(path)


def pairs_of(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def make_shards(folder, count, per_shard, compress=()):
    """`count` shard pairs named train.K.en / train.K.de; pair i is ("en i", "de i")."""
    expected = []
    for k in range(count):
        numbers = range(k * per_shard, (k + 1) * per_shard)
        gz = k in compress
        suffix = ".gz" if gz else ""
        write(folder / f"train.{k}.en{suffix}", [f"en {i}" for i in numbers], gz)
        write(folder / f"train.{k}.de{suffix}", [f"de {i}" for i in numbers], gz)
        expected += [(f"en {i}", f"de {i}") for i in numbers]
    return expected


def test_shards_by_glob_and_list_mixed_gzip_keep_order(tmp_path):
    expected = make_shards(tmp_path, 3, 1500, compress={1})  # more than one batch of lines a shard
    by_glob = load_parallel_files(str(tmp_path / "train.*.en*"), str(tmp_path / "train.*.de*"))
    assert pairs_of(by_glob) == expected
    sources = sorted(str(p) for p in tmp_path.glob("train.*.en*"))
    targets = sorted(str(p) for p in tmp_path.glob("train.*.de*"))
    assert pairs_of(load_parallel_files(sources, targets)) == expected


def test_line_counts_are_compared_before_reading(tmp_path):
    make_shards(tmp_path, 2, 5)
    write(tmp_path / "train.1.de", [f"de {i}" for i in range(4)])  # one line short
    with pytest.raises(ValueError, match=r"train\.1\.en has 5 lines, .*train\.1\.de has 4 lines"):
        load_parallel_files(str(tmp_path / "train.*.en"), str(tmp_path / "train.*.de"))
    with pytest.raises(ValueError, match="2 source file.*1 target file"):
        load_parallel_files(str(tmp_path / "train.*.en"), str(tmp_path / "train.0.de"))


def test_missing_shard_and_empty_glob(tmp_path):
    make_shards(tmp_path, 1, 3)
    with pytest.raises(FileNotFoundError, match="train.7.en: no such file"):
        load_parallel_files([str(tmp_path / "train.0.en"), str(tmp_path / "train.7.en")],
                            [str(tmp_path / "train.0.de")] * 2)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        load_parallel_files(str(tmp_path / "nothing.*.en"), str(tmp_path / "train.0.de"))


def test_truncated_gzip_is_a_clear_error(tmp_path):
    good = write(tmp_path / "a.en", [f"line {i}" for i in range(2000)], compress=True)
    data = open(good, "rb").read()
    (tmp_path / "cut.de").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.de: not a valid gzip file, truncated or corrupt"):
        load_parallel_files(good, str(tmp_path / "cut.de"))


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_count_lines_matches_python(tmp_path, ending):
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 3000):
        lines = ["x" * int(k) for k in rng.integers(0, 5000, n)]  # spans many 1 MiB chunks
        path = tmp_path / f"f{n}.txt"
        write(path, lines, ending=ending)
        assert count_lines(str(path)) == n
        data = path.read_bytes()
        if data:
            path.write_bytes(data.rstrip(b"\r\n"))  # no newline after the last line
            assert count_lines(str(path)) == len(data.decode().splitlines())


def test_bad_lines_are_skipped_and_counted(tmp_path):
    source = tmp_path / "s.en"
    source.write_bytes(b"\xef\xbb\xbfa b\nbad \xff\n\nc d\none two three four\nw\nok\n")
    target = write(tmp_path / "t.de", ["x y", "fine", "z", " ", "eins", "a b c d e f g h i j", "gut"])
    report = CorpusReport()
    pairs = load_parallel_files(str(source), target, max_words=5, max_ratio=3, report=report)
    assert pairs_of(pairs) == [("a b", "x y"), ("ok", "gut")]  # BOM dropped
    assert report.lines == 7
    assert report.counts() == {"read": 7, "kept": 2, "not_utf8": 1, "empty": 2, "malformed": 0,
                               "too_long": 1, "bad_ratio": 1, "too_long_tokens": 0}
    assert "skipped 5" in str(report)
    report.reset()
    assert report.counts()["read"] == 0


@pytest.mark.parametrize("line,reason", [(b"bad \xff", "not valid UTF-8"), (b"  ", "an empty side"),
                                         (b"w " * 9, "more words than max_words")])
def test_strict_names_file_and_line(tmp_path, line, reason):
    lines = [b"ok %d" % i for i in range(2500)]
    lines[2100] = line  # in the third batch of lines
    (tmp_path / "s.en").write_bytes(b"\n".join(lines) + b"\n")
    target = write(tmp_path / "t.de", [f"gut {i}" for i in range(2500)])
    pairs = load_parallel_files(str(tmp_path / "s.en"), target, strict=True, max_words=8)
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        list(pairs)
    assert str(corpus_error(caught.value)) == f"{tmp_path / 's.en'} line 2101: {reason}"


def test_locations_follow_the_pairs(tmp_path):
    make_shards(tmp_path, 2, 3)
    pairs = load_parallel_files(str(tmp_path / "train.*.en"), str(tmp_path / "train.*.de"),
                                with_locations=True)
    where = [w.decode() for _, _, w in pairs.as_numpy_iterator()]
    assert where[4] == f"{tmp_path / 'train.1.en'} line 2"


def test_spread_sample_takes_every_kth():
    ds = tf.data.Dataset.range(100)
    assert list(spread_sample(ds, 10).as_numpy_iterator()) == list(range(0, 100, 10))
    assert list(spread_sample(ds, 30).as_numpy_iterator()) == list(range(0, 100, 4))[:30]
    stream = ds.filter(lambda x: True)  # unknown cardinality: the total must be told
    assert list(spread_sample(stream, 10, total=100).as_numpy_iterator()) == list(range(0, 100, 10))
    assert list(spread_sample(stream, 5).as_numpy_iterator()) == [0, 1, 2, 3, 4]  # head, logged


def test_vocabulary_sample_reaches_the_end_of_a_larger_corpus():
    # The first half speaks only of "alpha", the second only of "omega": a sample of the
    # head would miss "omega", one spread over the corpus has both.
    sentences = ["alpha alpha"] * 500 + ["omega omega"] * 500
    vocab = build_vocabulary(sentences, vocab_size=60, max_sentences=100)
    head = build_vocabulary(sentences[:100], vocab_size=60, max_sentences=None)
    assert "alpha" in vocab and "omega" in vocab
    assert "omega" not in head


MEMORY_CHILD = textwrap.dedent("""
    import os, resource, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    from keras_attention.data import load_parallel_files
    for source, target in zip(sys.argv[1::2], sys.argv[2::2]):  # each corpus read whole, one after the other
        pairs = load_parallel_files(source, target, max_words=80, max_ratio=9)
        n = 0
        for batch in pairs.batch(4096).prefetch(2):
            n += int(batch[0].shape[0])
        print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)  # pairs read, peak RSS so far (MB)
""")


def test_memory_does_not_grow_with_the_corpus(tmp_path):
    """11k pairs read, then 110k (31 MB more text) in the same process: the second may raise the peak RSS
    by at most 20 MB.

    The first read leaves the peak of TensorFlow and the pipeline's working memory; a reader that held
    the corpus (a `.cache()`, a list of lines) would add the larger text on top. Long lines give as much
    text in a third of the lines (tf.data works per line)."""
    sizes, paths = (11_000, 110_000), []
    words = " ".join(["word"] * 30)
    for n in sizes:
        for side in ("en", "de"):
            paths.append(tmp_path / f"c{n}.{side}")
            with open(paths[-1], "w") as f:
                f.writelines(f"{words} {i}\n" for i in range(n))
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, *map(str, paths)], capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    (small, small_peak), (large, large_peak) = (map(int, line.split()) for line in out.stdout.splitlines()[-2:])
    assert (small, large) == sizes
    assert large_peak <= small_peak + 20, (small_peak, large_peak)
