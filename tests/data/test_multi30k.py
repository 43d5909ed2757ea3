import functools
import gzip
import hashlib
import http.server
import inspect
import os
import re
import shutil
import threading
import warnings

import pytest

from keras_attention import DATA_ENV_VAR
from keras_attention.data import load_multi30k
from keras_attention.data import multi30k as multi30k_module


def pairs_of(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize(
    "source, target, split, prefix",
    [
        ("en", "de", "train", "train"),
        ("de", "en", "val", "val"),
        ("fr", "cs", "test_2016_flickr", "test_2016_flickr"),
        ("cs", "en", "validation", "val"),
        ("en", "fr", "test", "test_2016_flickr"),
    ],
)
def test_pairs_match_the_files(multi30k_dir, read_gz, source, target, split, prefix):
    expected_source = read_gz(os.path.join(multi30k_dir, f"{prefix}.{source}.gz"))
    expected_target = read_gz(os.path.join(multi30k_dir, f"{prefix}.{target}.gz"))
    pairs = pairs_of(load_multi30k(source, target, split))
    assert len(pairs) == len(expected_source) == len(expected_target)
    assert pairs[0] == (expected_source[0], expected_target[0])
    assert pairs[-1] == (expected_source[-1], expected_target[-1])
    assert pairs == list(zip(expected_source, expected_target))


def test_split_sizes(multi30k_dir):
    # The sizes published with the corpus (and in the data README).
    for split, size in [("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)]:
        assert load_multi30k("en", "de", split).cardinality().numpy() == size


def test_embedded_checksums_match_the_shared_sums_file(multi30k_dir):
    with open(os.path.join(multi30k_dir, "SHA256SUMS")) as f:
        listed = dict(reversed(line.split()) for line in f if line.strip())
    assert multi30k_module.SHA256 == listed
    for name, digest in listed.items():
        assert sha256(os.path.join(multi30k_dir, name)) == digest


def test_bad_arguments_name_the_argument(multi30k_dir):
    with pytest.raises(ValueError, match="source='jp'"):
        load_multi30k("jp", "en")
    with pytest.raises(ValueError, match="target='EN'"):
        load_multi30k("de", "EN")
    with pytest.raises(ValueError, match="split='test_2017_flickr'"):
        load_multi30k("de", "en", "test_2017_flickr")
    with pytest.raises(ValueError, match="source='de', target='de'"):
        load_multi30k("de", "de")


def copy_val(multi30k_dir, folder, first_line=None):
    """Copy val.{en,de}.gz into folder, optionally rewriting the first English line."""
    os.makedirs(folder, exist_ok=True)
    for lang in ("en", "de"):
        shutil.copy(os.path.join(multi30k_dir, f"val.{lang}.gz"), folder)
    if first_line is not None:
        path = os.path.join(folder, "val.en.gz")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")
        lines[0] = first_line
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("\n".join(lines))


def test_lookup_order_data_dir_alone_else_env_then_cache(multi30k_dir, tmp_path, monkeypatch):
    copy_val(multi30k_dir, tmp_path / "mine", first_line="from data_dir")
    copy_val(multi30k_dir, tmp_path / "env" / "multi30k", first_line="from env")
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "env"))
    unreachable = "http://127.0.0.1:9/"  # Nothing may be downloaded here.

    def first(**kwargs):
        # The edited copies are not the published files: each load says so.
        with pytest.warns(UserWarning, match=r"val\.en\.gz is not the published Multi30k val\.en\.gz"):
            return pairs_of(load_multi30k("en", "de", "val", base_url=unreachable, **kwargs))[0][0]

    assert first(data_dir=tmp_path / "mine") == "from data_dir"
    # A data_dir may also be the parent of multi30k/.
    assert first(data_dir=tmp_path / "env") == "from env"
    # A data_dir without the files is an error, not a reason to read another copy.
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(FileNotFoundError, match=r"elsewhere: holds no Multi30k val\.en\.gz"):
        load_multi30k("en", "de", "val", base_url=unreachable, data_dir=tmp_path / "elsewhere")
    assert first() == "from env"
    # The variable naming no folder (a typo) is named, not answered with a download.
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "typo"))
    with pytest.raises(FileNotFoundError, match=re.escape(f"${DATA_ENV_VAR} is {tmp_path / 'typo'}, which is not a")):
        load_multi30k("en", "de", "val", base_url=unreachable)
    # No data_dir, nothing in the env folder: the Keras cache, checked by sha256.
    monkeypatch.delenv(DATA_ENV_VAR)
    cache = tmp_path / "keras_home"
    copy_val(multi30k_dir, cache / "datasets" / "multi30k")
    with open(os.path.join(multi30k_dir, "val.en.gz"), "rb") as f:
        expected = gzip.decompress(f.read()).decode().split("\n")[0]
    def published_first(**kwargs):
        return pairs_of(load_multi30k("en", "de", "val", base_url=unreachable, **kwargs))[0][0]

    assert published_first(cache_dir=str(cache)) == expected
    monkeypatch.setenv("KERAS_HOME", str(cache))
    assert published_first() == expected


def test_published_local_files_load_without_a_warning(multi30k_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pairs = pairs_of(load_multi30k("en", "de", "val", data_dir=multi30k_dir))
        assert len(pairs) == multi30k_module.SPLIT_SIZES["val"]


def test_the_warning_names_the_callers_line_and_follows_an_edited_file(multi30k_dir, tmp_path):
    """The warning points at the line that asked for the files, through `load_multi30k` or `multi30k_paths`;
    a file checked once is checked again after it changes (the sums are remembered by size and time)."""
    copy_val(multi30k_dir, tmp_path)
    names = ["val.en.gz", "val.de.gz"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        multi30k_module.multi30k_paths(names, data_dir=tmp_path)  # the published files: checked, no warning
    copy_val(multi30k_dir, tmp_path, first_line="edited")
    with pytest.warns(UserWarning, match=r"val\.en\.gz is not the published") as caught:
        line = inspect.currentframe().f_lineno + 1
        load_multi30k("en", "de", "val", data_dir=tmp_path)
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]
    with pytest.warns(UserWarning, match=r"val\.en\.gz is not the published") as caught:
        line = inspect.currentframe().f_lineno + 1
        multi30k_module.multi30k_paths(names, data_dir=tmp_path)
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder, records requests, and cuts `truncated` files short."""

    requested = []
    truncated = set()

    def log_message(self, *args):
        pass

    def do_GET(self):
        name = self.path.rsplit("/", 1)[-1]
        self.requested.append(name)
        if name in self.truncated:
            with open(self.translate_path(self.path), "rb") as f:
                data = f.read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(multi30k_dir, tmp_path):
    """An HTTP server on 127.0.0.1 serving copies of the files; val.de.gz corrupted."""
    root = tmp_path / "served"
    served = root / "data" / "task1" / "raw"  # As in the multi30k/dataset repository.
    served.mkdir(parents=True)
    for name in multi30k_module.SHA256:
        if name.startswith(("val.", "test_2016_flickr.")):
            shutil.copy(os.path.join(multi30k_dir, name), served)
    with open(served / "val.de.gz", "r+b") as f:
        f.seek(100)
        f.write(b"corrupted")
    cut = {"test_2016_flickr.fr.gz"}
    handler = type("Handler", (_Handler,), {"requested": [], "truncated": cut})
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/data/task1/raw/", handler, served
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_download_checks_and_caches(server, multi30k_dir, read_gz, tmp_path, monkeypatch):
    base_url, handler, _ = server
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    cache = tmp_path / "cache"
    pairs = pairs_of(load_multi30k("en", "cs", "test", base_url=base_url, cache_dir=str(cache)))
    folder = cache / "datasets" / "multi30k"
    assert sorted(os.listdir(folder)) == ["test_2016_flickr.cs.gz", "test_2016_flickr.en.gz"]
    for name in os.listdir(folder):
        assert sha256(folder / name) == sha256(os.path.join(multi30k_dir, name))
    en = read_gz(os.path.join(multi30k_dir, "test_2016_flickr.en.gz"))
    assert pairs[0][0] == en[0] and len(pairs) == len(en)
    assert handler.requested == ["test_2016_flickr.en.gz", "test_2016_flickr.cs.gz"]
    # A second load uses the cache: no new request.
    load_multi30k("cs", "en", "test", base_url=base_url, cache_dir=str(cache))
    assert len(handler.requested) == 2


def test_corrupted_download_is_rejected_and_deleted(server, tmp_path, monkeypatch):
    base_url, handler, served = server
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    cache = tmp_path / "cache"
    with pytest.raises(ValueError) as info:
        load_multi30k("en", "de", "val", base_url=base_url, cache_dir=str(cache))
    message = str(info.value)
    assert "val.de.gz" in message and "checksum mismatch" in message
    assert multi30k_module.SHA256["val.de.gz"] in message
    assert sha256(served / "val.de.gz") in message  # The actual sum of what was served.
    folder = cache / "datasets" / "multi30k"
    assert sorted(os.listdir(folder)) == ["val.en.gz"]  # The good file stays, no partial one.


def test_interrupted_download_leaves_nothing(server, tmp_path, monkeypatch):
    base_url, handler, _ = server
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    cache = tmp_path / "cache"
    with pytest.raises(OSError, match="test_2016_flickr.fr.gz: download from .* failed"):
        load_multi30k("fr", "en", "test", base_url=base_url, cache_dir=str(cache))
    assert os.listdir(cache / "datasets" / "multi30k") == []
    with pytest.raises(OSError, match="train.en.gz: download from .* failed"):  # 404
        load_multi30k("en", "de", "train", base_url=base_url, cache_dir=str(cache))
    assert os.listdir(cache / "datasets" / "multi30k") == []


def test_each_local_file_is_hashed_once_a_process(multi30k_dir, tmp_path, monkeypatch):
    copy_val(multi30k_dir, tmp_path)
    hashed = []
    real = multi30k_module.sha256_of
    monkeypatch.setattr(multi30k_module, "sha256_of", lambda path: hashed.append(os.path.basename(path)) or real(path))
    monkeypatch.setattr(multi30k_module, "_CHECKED", {})
    for _ in range(3):
        multi30k_module.multi30k_paths(["val.en.gz", "val.de.gz"], data_dir=tmp_path)
    assert hashed == ["val.en.gz", "val.de.gz"]
