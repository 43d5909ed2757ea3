"""A run's output folder: refused when it holds a run, resumed or overwritten on request, restored on failure."""

import hashlib
import os
import shutil

import pytest

from keras_attention.cli import main
from keras_attention.training.run_folder import PREVIOUS, RunFolder
from tests.conftest import TINY_RUN


def snapshot(folder):
    """Every file under `folder` (relative path -> SHA-256), to compare before and after."""
    files = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            files[os.path.relpath(path, folder)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return files


def finished_run(folder, backup=False):
    (folder / "translator").mkdir(parents=True)
    (folder / "translator" / "model.keras").write_bytes(b"old model")
    (folder / "results.json").write_text('{"old": true}')
    (folder / "notes.txt").write_text("the user's own file")
    if backup:
        (folder / "backup").mkdir()
        (folder / "backup" / "latest.weights.h5").write_bytes(b"state")
    return snapshot(folder)


def test_a_folder_holding_a_run_is_refused_with_both_ways_on(tmp_path):
    before = finished_run(tmp_path / "run")
    with pytest.raises(ValueError) as error:
        RunFolder(tmp_path / "run")
    message = str(error.value)
    assert "\n" not in message and str(tmp_path / "run") in message
    assert "--resume" in message and "--overwrite" in message and "translator, results.json" in message
    with pytest.raises(ValueError, match="cannot be resumed"):
        RunFolder(tmp_path / "run", resume=True)  # finished, and its backup is gone
    with pytest.raises(ValueError, match="at most one"):
        RunFolder(tmp_path / "run", resume=True, overwrite=True)
    assert snapshot(tmp_path / "run") == before


def test_resume_takes_a_backup_or_starts_a_run(tmp_path):
    before = finished_run(tmp_path / "run", backup=True)
    folder = RunFolder(tmp_path / "run", resume=True)
    folder.failed()  # a failed resume removes nothing
    assert snapshot(tmp_path / "run") == before
    RunFolder(tmp_path / "new", resume=True).finished()  # nothing to resume: a new run
    assert (tmp_path / "new").is_dir()


def test_overwrite_keeps_the_old_run_until_the_new_one_finishes(tmp_path):
    run = tmp_path / "run"
    before = finished_run(run)
    folder = RunFolder(run, overwrite=True)
    assert sorted(os.listdir(run)) == [PREVIOUS, "notes.txt"]  # only the run's own entries move
    (run / "translator").mkdir()
    (run / "translator" / "model.keras").write_bytes(b"new, half trained")
    (run / "history.csv").write_text("epoch\n")
    folder.failed()
    assert snapshot(run) == before  # the new run's files gone, the old ones back
    with pytest.raises(ValueError, match="already holds a run"):
        RunFolder(run)

    folder = RunFolder(run, overwrite=True)
    (run / "translator").mkdir()
    (run / "translator" / "model.keras").write_bytes(b"new model")
    folder.finished()
    assert sorted(os.listdir(run)) == ["notes.txt", "translator"]
    assert (run / "translator" / "model.keras").read_bytes() == b"new model"


def test_resume_starts_again_a_run_killed_before_its_first_backup(tmp_path):
    run = tmp_path / "run"
    (run / "translator").mkdir(parents=True)
    (run / "translator" / "model.keras").write_bytes(b"untrained start")
    (run / "history.csv").write_text("")
    (run / "notes.txt").write_text("the user's own file")
    before = snapshot(run)
    folder = RunFolder(run, resume=True)
    assert folder.restarted
    assert sorted(os.listdir(run)) == [PREVIOUS, "notes.txt"]
    (run / "translator").mkdir()
    folder.failed()  # killed again before a backup: the first attempt's files come back
    assert snapshot(run) == before
    folder = RunFolder(run, resume=True)
    (run / "backup").mkdir()
    (run / "results.json").write_text("{}")
    folder.finished()
    assert sorted(os.listdir(run)) == ["backup", "notes.txt", "results.json"]
    assert not RunFolder(run, resume=True).restarted  # a backup: resumed, not restarted


def test_a_set_aside_run_left_by_a_killed_overwrite_is_never_discarded(tmp_path):
    run = tmp_path / "run"
    finished_run(run)
    RunFolder(run, overwrite=True)  # ... and the process is killed here
    before = snapshot(run)
    with pytest.raises(ValueError, match=f"{PREVIOUS} holds a run"):
        RunFolder(run, overwrite=True)
    assert snapshot(run) == before


def test_a_failed_new_run_leaves_nothing_unless_it_wrote_a_backup(tmp_path):
    folder = RunFolder(tmp_path / "new")
    (tmp_path / "new" / "translator").mkdir()
    folder.failed()
    assert not (tmp_path / "new").exists()
    folder = RunFolder(tmp_path / "kept")
    (tmp_path / "kept" / "backup").mkdir()
    folder.failed()
    assert (tmp_path / "kept" / "backup").is_dir()  # what --resume continues from


def test_cli_train_refuses_then_overwrites(tmp_path, capsys, tiny_run):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)  # the shared run, trained by the same command
    command = [*TINY_RUN, "--output", str(run)]
    before = snapshot(run)
    capsys.readouterr()
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err and "Traceback" not in err
    assert snapshot(run) == before
    missing = ["--dataset", "files", "--train-files", str(tmp_path / "no.en"), str(tmp_path / "no.de")]
    assert main([*command, "--overwrite", *missing]) == 2  # fails after the old run was set aside
    assert "no.en" in capsys.readouterr().err
    assert snapshot(run) == before
    assert main([*command, "--overwrite", "--seed", "5"]) == 0
    after = snapshot(run)
    assert PREVIOUS not in os.listdir(run)
    assert after["translator/model.keras"] != before["translator/model.keras"]


def test_a_folder_of_other_files_or_a_file_is_refused_untouched(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("chapter 1")
    before = snapshot(tmp_path)
    for options in ({}, {"resume": True}, {"overwrite": True}):
        with pytest.raises(ValueError, match=r"mine holds files that are not a run \(thesis.tex\): give a new"):
            RunFolder(tmp_path / "mine", **options)
    with pytest.raises(ValueError, match="thesis.tex is a file"):
        RunFolder(tmp_path / "mine" / "thesis.tex")
    assert snapshot(tmp_path) == before
    RunFolder(tmp_path / "mine", shared=True).finished()  # a multi-worker run's chief: the workers' folders inside


def test_a_failed_run_removes_the_folders_it_made(tmp_path):
    (tmp_path / "keep").mkdir()
    folder = RunFolder(tmp_path / "keep" / "new" / "deeper" / "run")
    assert (tmp_path / "keep" / "new" / "deeper" / "run").is_dir()
    (tmp_path / "keep" / "new" / "deeper" / "run" / "history.csv").write_text("epoch\n")
    folder.failed()
    assert os.listdir(tmp_path / "keep") == []  # new/, deeper/ and run/ go; keep/ was there before
