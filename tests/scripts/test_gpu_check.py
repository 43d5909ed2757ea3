"""scripts/gpu_check.sh, checked without a GPU: every command it runs is one its script accepts.

No one runs the GPU script here, so a renamed flag or a misspelled variant
would only show on someone else's GPU. Each `python -u scripts/NAME.py ...`
line is handed to that script's own `main`, whose argument parser runs for
real; the test stops it once the arguments are parsed.
"""

import argparse
import importlib
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
OUT = "/gpu-check-output"  # never written: the scripts stop once their arguments are parsed


class _Parsed(Exception):
    """Raised in place of running the benchmark once its arguments are parsed."""


def gpu_commands(out_dir):
    """The benchmark commands of gpu_check.sh as (script name, argv), `$out` replaced by `out_dir`."""
    text = (ROOT / "scripts" / "gpu_check.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        words = shlex.split(line.replace('"$out', f'"{out_dir}'), comments=True)
        if words[:2] == ["python", "-u"] and words[2].startswith("scripts/"):
            commands.append((Path(words[2]).stem, words[3:]))
    return commands


def test_the_gpu_script_runs_every_gpu_benchmark():
    names = [name for name, _ in gpu_commands(OUT)]
    assert names == ["benchmark_training", "benchmark_training", "benchmark_precision", "benchmark_attention",
                     "benchmark_xla_break_even", "benchmark_buckets"]


def parse_only(name, argv, monkeypatch):
    """The namespace script `name`'s `main(argv)` parses, without running the benchmark."""
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise _Parsed(parse(self, args, namespace))  # a bad flag or value exits in `parse`, as it would on the GPU

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    with pytest.raises(_Parsed) as parsed:
        importlib.import_module(name).main(argv)
    return parsed.value.args[0]


@pytest.mark.parametrize(("name", "argv"), gpu_commands(OUT),
                         ids=[f"{i}-{name}" for i, (name, _) in enumerate(gpu_commands(OUT))])
def test_each_gpu_benchmark_command_is_accepted_by_its_script(name, argv, monkeypatch):
    assert parse_only(name, argv, monkeypatch).json.startswith(OUT)


def test_a_misspelled_flag_is_refused(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        parse_only("benchmark_attention", ["--batchsize", "32"], monkeypatch)
    assert "unrecognized arguments: --batchsize" in capsys.readouterr().err
