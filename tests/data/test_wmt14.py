"""WMT14 en-de from local files in the usual layout (small files stand in for the real ones)."""

import gzip

import pytest

from keras_attention.data import load_wmt14


@pytest.fixture
def wmt14_dir(tmp_path):
    folder = tmp_path / "wmt14"
    folder.mkdir()
    for prefix, n in (("train", 5), ("newstest2013", 3), ("newstest2014", 4)):
        for language in ("en", "de"):
            text = "".join(f"{prefix} {language} {i}\n" for i in range(n)).encode()
            if prefix == "train":  # the big file gzip-compressed, the test sets plain
                (folder / f"{prefix}.{language}.gz").write_bytes(gzip.compress(text))
            else:
                (folder / f"{prefix}.{language}").write_bytes(text)
    return tmp_path


@pytest.mark.parametrize("split,prefix,n", [("train", "train", 5), ("validation", "newstest2013", 3),
                                            ("test", "newstest2014", 4)])
def test_splits_from_local_files(wmt14_dir, split, prefix, n):
    pairs = [(s.decode(), t.decode()) for s, t in load_wmt14("de", "en", split, wmt14_dir).as_numpy_iterator()]
    assert pairs == [(f"{prefix} de {i}", f"{prefix} en {i}") for i in range(n)]


def test_missing_files_and_bad_arguments(wmt14_dir, tmp_path):
    (wmt14_dir / "wmt14" / "newstest2014.de").unlink()
    with pytest.raises(ValueError, match="No WMT14 file newstest2014.de in"):
        load_wmt14("en", "de", "test", wmt14_dir)
    with pytest.raises(ValueError, match="pass data_dir"):
        load_wmt14("en", "de", "train")
    with pytest.raises(ValueError, match="source='fr'"):
        load_wmt14("fr", "de", "train", wmt14_dir)
