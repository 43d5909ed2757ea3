import gzip
import logging
import os

import pytest

from keras_attention.data.text_files import read_all_lines, read_lines, read_parallel_lines


def write(path, data, compress=False):
    data = data.encode("utf-8") if isinstance(data, str) else data
    if compress:
        data = gzip.compress(data)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.mark.parametrize("compress", [False, True])
def test_reads_plain_and_gzip_alike(tmp_path, compress):
    path = write(tmp_path / "a.txt", "Ein Hund.\r\nZwei Katzen\nDrei Mäuse", compress)
    assert read_lines(path) == ["Ein Hund.", "Zwei Katzen", "Drei Mäuse"]


def test_gzip_is_detected_from_content_not_name(tmp_path):
    path = write(tmp_path / "no_suffix", "a\nb\n", compress=True)
    assert read_lines(path) == ["a", "b"]


def test_byte_order_mark_is_dropped_and_nothing_else_changes(tmp_path):
    path = write(tmp_path / "bom.txt", b"\xef\xbb\xbf  two  spaces \nb\n")
    assert read_lines(path) == ["  two  spaces ", "b"]


def test_missing_file_names_the_file(tmp_path):
    missing = str(tmp_path / "nope.de.gz")
    with pytest.raises(FileNotFoundError, match="nope.de.gz"):
        read_lines(missing)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file_is_an_error(tmp_path, content):
    path = write(tmp_path / "empty.en", content)
    with pytest.raises(ValueError, match="empty.en: the file is empty"):
        read_lines(path)


@pytest.mark.parametrize("compress", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, compress):
    lines = [f"line {i}".encode() for i in range(1, 20)]
    lines[16] = b"caf\xe9 au lait"  # Latin-1, line 17.
    path = write(tmp_path / "train.de.gz", b"\n".join(lines) + b"\n", compress)
    with pytest.raises(ValueError, match=r"train\.de\.gz line 17: not valid UTF-8 \(byte 0xe9"):
        read_lines(path)


def test_empty_line_is_an_error_naming_file_and_line(tmp_path):
    path = write(tmp_path / "val.fr", "un\ndeux\n   \nquatre\n")
    with pytest.raises(ValueError, match="val.fr line 3: empty line"):
        read_lines(path)


def test_skip_empty_reports_how_many(tmp_path, caplog):
    path = write(tmp_path / "val.fr", "un\n\ndeux\n \ntrois\n")
    with caplog.at_level(logging.WARNING, logger="keras_attention.data"):
        assert read_lines(path, skip_empty=True) == ["un", "deux", "trois"]
    assert "skipped 2 empty line(s) (first at line 2)" in caplog.text


def test_read_all_lines_keeps_empty_lines(tmp_path):
    path = write(tmp_path / "x.txt", "a\n\nb\n")
    assert read_all_lines(path) == ["a", "", "b"]


def test_parallel_files_with_different_line_counts(tmp_path):
    source = write(tmp_path / "s.en", "a\nb\nc\n")
    target = write(tmp_path / "t.de", "x\ny\n")
    with pytest.raises(ValueError) as info:
        read_parallel_lines(source, target)
    message = str(info.value)
    assert "s.en has 3 lines" in message and "t.de has 2 lines" in message


def test_parallel_skip_empty_drops_whole_pairs_and_keeps_alignment(tmp_path, caplog):
    source = write(tmp_path / "s.en", "a\n\nc\nd\n")
    target = write(tmp_path / "t.de", "w\nx\n\nz\n")
    with caplog.at_level(logging.WARNING, logger="keras_attention.data"):
        assert read_parallel_lines(source, target, skip_empty=True) == (["a", "d"], ["w", "z"])
    assert "skipped 2 pair(s) with an empty side out of 4" in caplog.text
    # The alignment check counts empty lines too.
    short = write(tmp_path / "short.de", "w\nx\n\n")
    with pytest.raises(ValueError, match="short.de has 3 lines"):
        read_parallel_lines(source, short, skip_empty=True)


def test_a_folder_is_not_a_file(tmp_path):
    with pytest.raises(IsADirectoryError, match=os.path.basename(tmp_path)):
        read_lines(tmp_path)


def test_broken_gzip_names_the_file(tmp_path):
    data = gzip.compress(b"a\nb\n" * 100)
    path = write(tmp_path / "cut.gz", data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.gz: not a valid gzip file"):
        read_lines(path)
