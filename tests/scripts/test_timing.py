"""scripts/timing.py: alternated rounds and their medians; what a benchmark JSON records."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import timing  # noqa: E402


def test_the_calls_alternate_in_reversed_order_every_other_round_after_a_first_call_each(monkeypatch):
    calls = []
    clock = iter(range(1000))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))  # every reading one second later

    times = timing.alternated_times({"a": "A", "b": "B"}, calls.append, repeats=3)

    assert calls == ["A", "B"] + ["A", "B", "B", "A", "A", "B"]
    assert times == {"a": (1, [1, 1, 1]), "b": (1, [1, 1, 1])}


def test_the_medians_leave_out_the_first_call(monkeypatch):
    durations = {"slow": iter([100.0, 1.0, 3.0, 2.0]), "fast": iter([50.0, 0.5, 0.5, 9.0])}
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def run(name):  # each call takes its next duration on the patched clock
        now[0] += next(durations[name])

    medians = timing.alternated_medians({"slow": "slow", "fast": "fast"}, run, repeats=3)

    assert medians == {"slow": 2.0, "fast": 0.5}  # medians of (1, 3, 2) and (0.5, 0.5, 9), not of the first calls


def test_a_benchmark_json_records_the_commit_it_was_measured_at(tmp_path):
    import json
    import subprocess

    path = tmp_path / "figures.json"
    timing.write_json(str(path), {"tokens_per_second": 5.0})
    written = json.loads(path.read_text(encoding="utf-8"))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(timing.__file__).parent).stdout.strip()
    assert written["commit"].rstrip("+") == (head or "unknown")  # CI's fresh clone: no local changes, no "+"
    assert written["tokens_per_second"] == 5.0 and written["command"].startswith("python ")
    timing.write_json(None, {"ignored": True})  # no --json: nothing written
