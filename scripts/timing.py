"""Timing shared by the benchmark scripts: alternated calls, medians, the JSON output."""

import json
import statistics
import time


def alternated_medians(fns, run, repeats):
    """Median seconds of `run(fn)` for each function of the dict `fns`.

    Every function is called once first (tracing, compiling, warming up),
    then the calls alternate A B C A B C ... `repeats` times, so that a slow
    moment of a shared machine hits all of them alike.
    """
    for fn in fns.values():
        run(fn)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            run(fn)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def write_json(path, data):
    """Write a script's figures to `path` (`--json`); do nothing when `path` is None."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
