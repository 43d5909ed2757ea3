"""Atomic writes: a writer that fails or is killed before the rename leaves the old file or folder whole."""

import os
import signal
import subprocess
import sys

import pytest

from keras_attention.base.files import check_output_file, folder_replaced_atomically, replaced_atomically, write_json


def test_a_failed_write_keeps_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "model.keras"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with replaced_atomically(path) as partial:
            assert partial.endswith(".keras") and os.path.dirname(partial) == str(tmp_path)
            with open(partial, "wb") as f:
                f.write(b"half of the n")
            raise RuntimeError("disk full")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["model.keras"]
    write_json(tmp_path / "results.json", {"bleu": 1.5, "text": "Größe"})
    assert (tmp_path / "results.json").read_text(encoding="utf-8") == '{"bleu": 1.5, "text": "Größe"}'


def test_a_writer_killed_between_write_and_rename_leaves_the_old_file(tmp_path):
    path = tmp_path / "translator.json"
    path.write_text('{"old": true}')
    writer = (
        "import os, signal, sys\n"
        "from keras_attention.base.files import replaced_atomically\n"
        "with replaced_atomically(sys.argv[1]) as partial:\n"
        "    open(partial, 'w').write('{\"new\": tr')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", writer, str(path)], timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert path.read_text() == '{"old": true}'


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.bin").write_bytes(b"old")
    (export / "stale.txt").write_text("from the old export")
    with pytest.raises(RuntimeError):
        with folder_replaced_atomically(export) as staging:
            assert os.path.dirname(staging) == str(tmp_path) and os.listdir(staging) == []
            (tmp_path / os.path.basename(staging) / "model.bin").write_bytes(b"half")
            raise RuntimeError("converter failed")
    assert sorted(os.listdir(tmp_path)) == ["export"] and (export / "model.bin").read_bytes() == b"old"
    with folder_replaced_atomically(str(export) + os.sep) as staging:
        (tmp_path / os.path.basename(staging) / "model.bin").write_bytes(b"new")
    assert os.listdir(tmp_path) == ["export"] and os.listdir(export) == ["model.bin"]
    assert (export / "model.bin").read_bytes() == b"new"
    with folder_replaced_atomically(tmp_path / "fresh") as staging:
        (tmp_path / os.path.basename(staging) / "a").write_text("a")
    assert (tmp_path / "fresh" / "a").read_text() == "a"


def test_a_swap_that_fails_half_way_puts_the_old_folder_back(tmp_path, monkeypatch):
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.bin").write_bytes(b"old")
    real_replace, calls = os.replace, []

    def second_rename_fails(source, destination):
        calls.append(destination)
        if len(calls) == 2:  # the new folder onto `path`, after the old one was moved aside
            raise OSError("disk gone")
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="disk gone"):
        with folder_replaced_atomically(export) as staging:
            (tmp_path / os.path.basename(staging) / "model.bin").write_bytes(b"new")
    assert sorted(os.listdir(tmp_path)) == ["export"] and (export / "model.bin").read_bytes() == b"old"


def test_a_link_is_followed_and_a_killed_writers_leftovers_are_cleared(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "old.txt").write_text("old")
    (tmp_path / "link").symlink_to(target)
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)  # a process that has ended
    (tmp_path / f"target.partial-{dead}-0123abcd").mkdir()  # killed while writing
    with folder_replaced_atomically(tmp_path / "link") as staging:
        (tmp_path / os.path.basename(staging) / "new.txt").write_text("new")
    assert sorted(os.listdir(tmp_path)) == ["link", "target"] and os.listdir(target) == ["new.txt"]
    # Killed between the two renames: the old folder is aside and `target` is missing; it is put back.
    os.replace(target, tmp_path / f"target.partial-{dead}-4567cdef-previous")
    (tmp_path / f"target.partial-{dead}-4567cdef").mkdir()
    with pytest.raises(RuntimeError):
        with folder_replaced_atomically(target):
            assert os.listdir(target) == ["new.txt"]
            raise RuntimeError("stop")
    assert sorted(os.listdir(tmp_path)) == ["link", "target"] and os.listdir(target) == ["new.txt"]


def test_output_file_paths_that_cannot_be_written_are_named(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    check_output_file(str(tmp_path / "page.html"))
    with pytest.raises(IsADirectoryError, match=f"Cannot write {tmp_path}: it is a folder"):
        check_output_file(str(tmp_path))
    with pytest.raises(NotADirectoryError, match="notes.txt is a file, not a folder"):
        check_output_file(str(tmp_path / "notes.txt" / "page.html"))
    with pytest.raises(FileNotFoundError, match="missing does not exist"):
        check_output_file(str(tmp_path / "missing" / "page.html"))


def test_run_paths_name_every_entry_of_a_run_folder():
    from keras_attention.base.files import RunPaths

    paths = RunPaths(os.path.join("runs", "x"))
    names = [paths.translator, paths.backup, paths.checkpoints, paths.history, paths.results]
    assert names == [os.path.join("runs", "x", entry) for entry in RunPaths.ENTRIES]


def test_run_paths_held_lists_only_the_run_entries_present(tmp_path):
    from keras_attention.base.files import RunPaths

    paths = RunPaths(str(tmp_path))
    assert paths.held() == []
    (tmp_path / "train.log").write_text("a log beside the run\n")
    (tmp_path / ".keras-attention-demo").write_text("{}")
    assert paths.held() == []
    os.makedirs(paths.checkpoints)
    (tmp_path / "history.csv").write_text("epoch\n")
    os.makedirs(paths.translator)
    assert paths.held() == ["translator", "checkpoints", "history.csv"]  # ENTRIES' order, not the alphabet's
