"""What the result renderers share: the benchmark JSONs, where they were measured, Markdown tables."""

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def exists(name):
    """Whether `benchmarks/<name>.json` exists."""
    return os.path.exists(os.path.join(ROOT, "benchmarks", f"{name}.json"))


def load(name):
    with open(os.path.join(ROOT, "benchmarks", f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)


def device_kind(device):
    """A JSON's device in the provenance line: "CPU" for any CPU (its name is already in the machine's), else as
    recorded ("GPU NVIDIA A100 x 2"). Benchmarks record "CPU", "/device:CPU:0" or "CPU (<machine>)"."""
    return "CPU" if device.upper().startswith("CPU") or "DEVICE:CPU" in device.upper() else device


def provenance(result, name, command):
    """When, where and how a JSON was measured, as far as the JSON records it."""
    if "date" in result and "machine" in result:
        device = f" ({device_kind(result['device'])})" if "device" in result else ""
        at = f" at {result['commit']}" if "commit" in result else ""
        return (f"Measured on {result['date']}, {result['machine']}{device}, with `{result.get('command', command)}`"
                f"{at}.")
    environment = result.get("environment", {})
    if environment:
        where = (f"on {environment['date'][:10]}, {environment['cpu_count']} CPU cores and "
                 f"{environment.get('gpus', 0)} GPUs")
    else:
        where = "on the project's 2-core CPU machine (the JSON records no date)"
    return f"Measured {where}, with `{command}` (`benchmarks/{name}`)."


def bleu(scores, lower_cased_output=False):
    """'cased / lower-cased' BLEU; a model that writes lower case has no cased score worth printing."""
    if not scores:
        return "not scored"
    cased = "-" if lower_cased_output else f"{scores['bleu']:.1f}"
    return f"{cased} / {scores['bleu_lowercase']:.1f}"


def moses_bleu_cell(scores):
    """fairseq's measure (lower-cased BLEU on Moses tokens) of a run's scores, or 'not scored'."""
    scores = scores or {}
    return f"{scores['bleu_moses_lowercase']:.1f}" if "bleu_moses_lowercase" in scores else "not scored"


def training_time(run):
    """'71 min', or '95 min, 6 validating' when the run recorded its evaluation seconds."""
    text = f"{run['train_seconds'] / 60:.0f} min"
    if run.get("evaluation_seconds") is not None:
        text += f", {run['evaluation_seconds'] / 60:.0f} validating"
    return text


def table(header, rows, notes):
    """A Markdown table (the first column left-aligned, the others right) followed by note paragraphs."""
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    for note in notes:
        lines += ["", note]
    return "\n".join(lines) + "\n"
