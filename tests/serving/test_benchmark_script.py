"""scripts/benchmark_serving.py in quick mode, on the test exports."""

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "benchmark_serving.py")


def test_benchmark_script_quick(exports, multi30k_dir, tmp_path):
    out = tmp_path / "serving.json"
    done = subprocess.run(
        [sys.executable, "-u", SCRIPT, exports["greedy"], os.path.dirname(exports["beam"]),
         "--quick", "--batch-sizes", "1", "4", "--data-dir", multi30k_dir, "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    report = json.loads(out.read_text())
    assert report["imported"] == []  # neither keras_attention nor keras_hub
    rows = [(r["decoding"].split(",")[0], r["batch_size"], r["sentences"]) for r in report["results"]]
    beam = "beam 3 (alpha 0.6)"
    assert rows == [("greedy", 1, 8), ("greedy", 4, 8), (beam, 1, 8), (beam, 4, 8)]
    assert all(r["sentences_per_second"] > 0 for r in report["results"])
    assert "sentences/s" in done.stdout
