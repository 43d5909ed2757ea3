"""The output folder of a training run: never replaced silently, never left half-replaced.

`train` into a folder that already holds a run stops with one line unless
told what to do:

- `resume=True` continues the run from its backup (an interrupted run, or a
  finished one kept with `keep_backup`, for more epochs). In a folder with no
  run yet it starts one, so a job scheduler can restart the same command; so
  it does in a folder whose run was killed before its first backup (no
  `backup/`, no `results.json`: nothing trained to keep), setting that run's
  files aside as `overwrite` does.
- `overwrite=True` starts again. The old run's files are moved to
  `OUTPUT/.previous-run/` and deleted only when the new run has finished; if
  the new run fails or is interrupted, they are moved back.
"""

import os
import shutil

from keras_attention.base.files import RunPaths

RUN_ENTRIES = RunPaths.ENTRIES  # what a run writes into its folder; any of them means the folder holds a run
PREVIOUS = ".previous-run"


class RunFolder:
    """Claim `path` for a run (see the module docstring); `finished()` or `failed()` at the end."""

    def __init__(self, path, resume=False, overwrite=False, shared=False):
        """`shared`: other processes write folders of their own inside `path` (the workers of a
        multi-worker run), so files that are not a run's do not make it refuse the folder."""
        if resume and overwrite:
            raise ValueError("Give at most one of resume and overwrite (--resume, --overwrite). "
                             "Received: both")
        self.path = os.fspath(path)
        self.paths = RunPaths(self.path)  # where each part of the run goes
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"{self.path} is a file; the output of a run is a folder: give a new or empty one.")
        self.created = _missing_folders(self.path)  # what this run makes, deepest first
        previous = os.path.join(self.path, PREVIOUS)
        if os.path.exists(previous):
            raise ValueError(f"{previous} holds a run that an interrupted --overwrite set aside: "
                             f"move its contents back into {self.path} or delete it, then run again.")
        held = self.paths.held()
        # A log written beside the run (`train ... > OUTPUT/train.log`) and hidden entries are no one's data.
        others = sorted(name for name in os.listdir(self.path) if name not in RUN_ENTRIES
                        and not name.startswith(".") and not name.endswith(".log")) if not self.created else []
        if not held and others and not shared:
            raise ValueError(f"{self.path} holds files that are not a run ({', '.join(others[:3])}"
                             f"{', ...' if len(others) > 3 else ''}): give a new or empty folder.")
        if held and not (resume or overwrite):
            raise ValueError(f"{self.path} already holds a run ({', '.join(held)}): pass --resume to continue "
                             "it (with more --epochs to extend a finished one) or --overwrite to start again.")
        # A run killed before its first backup wrote its untrained translator and an empty history only.
        backed_up, results = os.path.exists(self.paths.backup), os.path.exists(self.paths.results)
        self.restarted = resume and bool(held) and not backed_up and not results
        if resume and held and not backed_up and not self.restarted:
            raise ValueError(f"{self.path} holds a finished run without its backup, so it cannot be resumed "
                             "(--keep-backup keeps it); pass --overwrite to start again.")
        self.held, self.set_aside = held, None
        if (overwrite or self.restarted) and held:
            self.set_aside = previous
            os.makedirs(previous)
            for name in held:
                os.replace(os.path.join(self.path, name), os.path.join(previous, name))
        os.makedirs(self.path, exist_ok=True)

    def finished(self):
        """The new run is complete: drop what `overwrite` set aside."""
        if self.set_aside:
            shutil.rmtree(self.set_aside, ignore_errors=True)

    def failed(self):
        """The run stopped with an error: put back what was there before it started.

        With `overwrite`, the new run's files go and the old run comes back.
        Otherwise, once a backup exists everything stays (a later `--resume`
        continues from it); before that, what this run wrote goes, and so
        does the folder if this run created it.
        """
        if self.set_aside:
            for name in self.paths.held():
                _remove(os.path.join(self.path, name))
            for name in os.listdir(self.set_aside):
                os.replace(os.path.join(self.set_aside, name), os.path.join(self.path, name))
            os.rmdir(self.set_aside)
            return
        if os.path.exists(self.paths.backup):
            return
        for name in set(self.paths.held()) - set(self.held):
            _remove(os.path.join(self.path, name))
        for folder in self.created:  # the folders this run made, if it left nothing in them
            if os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)


def _missing_folders(path):
    """`path` and those of its parent folders that do not exist yet, deepest first."""
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)
