"""The distribution benchmark runs in quick mode (in a child process: it splits the CPU first)."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "benchmark_distribution.py"


def test_distribution_benchmark_reports_both_batches(tmp_path):
    out = tmp_path / "distribution.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["replicas"], r["global_batch"], r["per_replica_batch"]) for r in rows] == [
        (1, 8, 8), (2, 8, 4), (2, 16, 8)]
    assert all(r["steps_per_second"] > 0 for r in rows)
    assert "per replica" in done.stdout and "steps/s" in done.stdout
