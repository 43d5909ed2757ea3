import gzip
import os

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_attention.data import CorpusReport, corpus_error, load_parallel_files, load_tfds_translation, load_tsv


def pairs_of(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def write(path, text, compress=False):
    data = text.encode("utf-8")
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if compress else data)
    return str(path)


@pytest.mark.parametrize("compress", [False, True])
def test_parallel_files(tmp_path, compress):
    source = write(tmp_path / "corpus.en", "A dog.\nTwo cats.\n", compress)
    target = write(tmp_path / "corpus.de", "Ein Hund.\nZwei Katzen.\n", compress)
    pairs = load_parallel_files(source, target)
    assert pairs_of(pairs) == [("A dog.", "Ein Hund."), ("Two cats.", "Zwei Katzen.")]


def strict_error(dataset):
    """The one-line corpus error a strict dataset raises while it is read."""
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        list(dataset)
    return str(corpus_error(caught.value))


def test_parallel_files_errors_name_the_files(tmp_path):
    source = write(tmp_path / "corpus.en", "a\nb\n")
    with pytest.raises(FileNotFoundError, match="missing.de"):
        load_parallel_files(source, tmp_path / "missing.de")
    with pytest.raises(ValueError, match="corpus.en has 2 lines.*three.de has 3 lines"):
        load_parallel_files(source, write(tmp_path / "three.de", "x\ny\nz\n"))
    with pytest.raises(ValueError, match="the corpus is empty"):
        load_parallel_files(write(tmp_path / "none.en", ""), write(tmp_path / "nothing.de", ""))
    blank = write(tmp_path / "blank.de", "x\n\n")
    assert strict_error(load_parallel_files(source, blank, skip_empty=False)).endswith(
        "blank.de line 2: an empty side")
    latin1 = tmp_path / "latin1.de"
    latin1.write_bytes("x\nGrüße\n".encode("latin-1"))
    assert strict_error(load_parallel_files(source, latin1, strict=True)).endswith(
        "latin1.de line 2: not valid UTF-8")


def test_tsv_with_extra_columns(tmp_path):
    path = write(tmp_path / "fra.txt", "Go.\tVa !\tCC-BY 2.0\nHi.\tSalut !\tCC-BY 2.0\n")
    assert pairs_of(load_tsv(path)) == [("Go.", "Va !"), ("Hi.", "Salut !")]
    reverse = load_tsv(path, source_column=1, target_column=0)
    assert pairs_of(reverse)[0] == ("Va !", "Go.")


def test_tsv_errors_name_file_and_line(tmp_path):
    path = write(tmp_path / "pairs.tsv", "a\tb\nno tab here\nc\td\n")
    assert strict_error(load_tsv(path, strict=True)).endswith(
        "pairs.tsv line 2: too few tab-separated columns")
    report = CorpusReport()
    assert pairs_of(load_tsv(path, report=report)) == [("a", "b"), ("c", "d")]
    assert report.counts()["malformed"] == 1
    path = write(tmp_path / "gaps.tsv", "a\tb\n\t x\nc\td\n\n")
    assert strict_error(load_tsv(path, skip_empty=False)).endswith("gaps.tsv line 2: an empty side")
    assert pairs_of(load_tsv(path)) == [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="source_column=1, target_column=1"):
        load_tsv(path, source_column=1, target_column=1)
    with pytest.raises(ValueError, match="target_column=-1"):
        load_tsv(path, target_column=-1)
    with pytest.raises(FileNotFoundError, match="absent.tsv"):
        load_tsv(tmp_path / "absent.tsv")


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory, multi30k_dir):
    """A TFDS data folder with multi30k_task1/de-en prepared from the shared files."""
    import keras_attention.data.multi30k_tfds  # noqa: F401 (registers the builder)

    data_dir = str(tmp_path_factory.mktemp("tfds"))
    builder = tfds.builder("multi30k_task1/de-en", data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=multi30k_dir)
    )
    return data_dir


def test_tfds_load_with_a_manual_folder(tmp_path, multi30k_dir, read_gz):
    import keras_attention.data.multi30k_tfds  # noqa: F401

    config = tfds.download.DownloadConfig(manual_dir=multi30k_dir)
    ds, info = tfds.load(
        "multi30k_task1/en-fr",
        split="validation",
        data_dir=str(tmp_path),
        as_supervised=True,
        with_info=True,
        download_and_prepare_kwargs={"download_config": config},
    )
    en = read_gz(os.path.join(multi30k_dir, "val.en.gz"))
    fr = read_gz(os.path.join(multi30k_dir, "val.fr.gz"))
    assert info.splits["train"].num_examples == len(read_gz(f"{multi30k_dir}/train.en.gz"))
    test_fr = read_gz(f"{multi30k_dir}/test_2016_flickr.fr.gz")
    assert info.splits["test"].num_examples == len(test_fr)
    # TFDS shuffles examples when it writes them: compare as sets of pairs.
    assert sorted(pairs_of(ds)) == sorted(zip(en, fr))


def test_load_tfds_translation_by_name(tfds_dir, multi30k_dir, read_gz):
    pairs = load_tfds_translation("multi30k_task1/de-en", "en", "de", "test", data_dir=tfds_dir)
    en = read_gz(os.path.join(multi30k_dir, "test_2016_flickr.en.gz"))
    de = read_gz(os.path.join(multi30k_dir, "test_2016_flickr.de.gz"))
    assert sorted(pairs_of(pairs)) == sorted(zip(en, de))
    sliced = load_tfds_translation(
        "multi30k_task1/de-en", "de", "en", "validation[:10]", data_dir=tfds_dir, download=False
    )
    assert len(pairs_of(sliced)) == 10


def test_load_tfds_translation_errors(tfds_dir):
    with pytest.raises(ValueError, match=r"name='multi30k_tsk1/de-en'") as info:
        load_tfds_translation("multi30k_tsk1/de-en", "de", "en", data_dir=tfds_dir)
    assert "multi30k_task1" in str(info.value)  # A close name is suggested.
    with pytest.raises(ValueError, match=r"languages of multi30k_task1/de-en: \['de', 'en'\]"):
        load_tfds_translation("multi30k_task1/de-en", "fr", "en", data_dir=tfds_dir)
    with pytest.raises(ValueError, match="split='dev'"):
        load_tfds_translation("multi30k_task1/de-en", "de", "en", "dev", data_dir=tfds_dir)
