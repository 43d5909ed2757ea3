"""Timing shared by the benchmark scripts: alternated calls, medians, the JSON output, profiler traces."""

import glob
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time


def alternated_times(fns, run, repeats):
    """Seconds of `run(fn)` for each function of the dict `fns`: `{name: (first, [each round])}`.

    Every function is called once first (tracing, compiling, warming up; its
    time is `first`), then the calls alternate `repeats` times, in reversed
    order every other round (A B C, C B A, A B C, ...), so that a slow moment
    of a shared machine hits all of them alike and no function always runs
    right after the same other one.
    """
    def timed(fn):
        start = time.perf_counter()
        run(fn)
        return time.perf_counter() - start

    first = {name: timed(fn) for name, fn in fns.items()}
    rounds = {name: [] for name in fns}
    order = list(fns.items())
    for round_ in range(repeats):
        for name, fn in order if round_ % 2 == 0 else order[::-1]:
            rounds[name].append(timed(fn))
    return {name: (first[name], rounds[name]) for name in fns}


def alternated_medians(fns, run, repeats):
    """Median seconds of `run(fn)` for each function of the dict `fns`, timed by `alternated_times`."""
    return {name: statistics.median(rounds) for name, (_, rounds) in alternated_times(fns, run, repeats).items()}


def machine():
    """This machine in a few words: CPU model and cores."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def device():
    """Where TensorFlow runs the benchmark: the first GPU's name and count, else the CPU."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return f"CPU ({machine()})"
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    return f"GPU {name}" + (f" x {len(gpus)}" if len(gpus) > 1 else "")


def commit():
    """The commit of the scripts' checkout (with `+` if its tree has changes), or "unknown".

    Asked in the scripts' folder, so that a run started from elsewhere records it too.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=here)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=here)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def write_json(path, data):
    """Write a script's figures to `path` (`--json`) with how, when and where they were measured.

    Adds `command`, `commit`, `date`, `machine` and `device` (unless `data` has them), which
    `scripts/make_results.py` prints under each table. Does nothing when
    `path` is None.
    """
    if path:
        data = {"command": "python " + " ".join(sys.argv), "commit": commit(), "date": time.strftime("%Y-%m-%d"),
                "machine": machine(), "device": device(), **data}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)


def read_trace(trace_dir):
    """The `XSpace` (planes of lines of timed events) of the newest TensorFlow profile written in `trace_dir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "*.xplane.pb")))
    if not paths:
        raise FileNotFoundError(f"The profiler wrote no trace to {trace_dir!r}")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    return space


def rss_mb():
    """This process' resident memory now (`VmRSS`, Linux), or None where /proc is missing."""
    return _status_mb("VmRSS")


def _status_mb(field):
    """A memory figure of /proc/self/status in MB, or None where there is none."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return round(next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024, 1)
    except (OSError, StopIteration):
        return None


def peak_rss_mb():
    """This process' peak resident memory: `VmHWM` (Linux), else `ru_maxrss`.

    `ru_maxrss` survives `exec` on Linux (a child started from a large
    parent reports the parent's peak), so `/proc/self/status` comes first.
    """
    peak = _status_mb("VmHWM")
    if peak is None:
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20, 1)
    return peak
