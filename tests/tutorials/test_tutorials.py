"""Every tutorial runs as a script in QUICK mode and writes its figures, the code of
its exercise solutions runs after it, and every committed notebook holds the same
cells as its script.

The tutorials run one after another in one Python process started for them
(`runpy`, as `python NN_name.py` runs a script; TensorFlow is imported once, and
the Keras dtype policy and pyplot's figures are reset between two scripts),
except tutorial 11, which sets TensorFlow up its own way (two logical CPU
devices before anything else) and gets a process of its own. The QUICK runs
share one model cache, as a reader running them in order does: they run in
order on one test worker (the `tutorials` xdist group), so 10 and 12 reload the
models 01-03 trained. Each tutorial still trains what it finds missing. In
QUICK mode a tutorial takes 5-45 s on a 2-core CPU; the timeout is generous
because CI machines are shared.
"""

import ast
import importlib
import importlib.util
import json
import os
import pathlib
import re
import select
import subprocess
import sys

import jupytext
import nbformat
import pytest


TUTORIALS = pathlib.Path(__file__).resolve().parents[2] / "tutorials"
SCRIPTS = sorted(TUTORIALS.glob("[0-9][0-9]_*.py"))
TIMEOUT_SECONDS = 300

# The figures each tutorial must write (tutorials/README.md shows one of each).
FIGURES = {
    "01_rnn_encoder_decoder": ["01_bleu_by_length.png"],
    "02_bahdanau_attention": ["02_bleu_by_length.png", "02_alignment_1.png", "02_alignment_2.png"],
    "03_luong_attention": ["03_global_vs_local.png", "03_alignment.png"],
    "05_query_key_value": [
        "05_soft_lookup.png", "05_inter_attention.png", "05_self_attention.png", "05_why_self_attention.png",
    ],
    "06_scaled_dot_product_and_multi_head": ["06_scaling.png", "06_heads.png"],
    "07_positional_encoding": ["07_position_encoding.png", "07_position_similarity.png"],
    "08_encoder_block": ["08_encoder_heads.png", "08_residual_stream.png"],
    "09_decoder": ["09_causal_mask.png", "09_future_tokens.png", "09_cross_attention.png"],
    "10_training_the_transformer": [
        "10_schedule.png", "10_label_smoothing.png", "10_history.png",
        "10_cross_attention_heads.png", "10_results.png", "10_architecture.png",
    ],
    "04_decomposable_attention": ["04_training.png", "04_alignment.png"],
    "11_distributed_training": ["11_loss_per_step.png"],
    "12_export_and_serve": ["12_serving_latency.png"],
}


def test_every_tutorial_is_listed():
    assert [s.stem for s in SCRIPTS] == sorted(FIGURES)


# Reads a job a line ({"script": name, "solutions": [code, ...]}), runs the script as __main__, then the
# solutions one after another in its globals (as a reader runs them after the last cell, each seeing what the
# ones before it left), and prints "RESULT {json}": whether each ended well, and what it printed. Its tf.data
# iterators are untuned, as the test workers' are (tests/untuned_iterators.py).
_RUNNER = r"""
import contextlib, io, json, runpy, sys, traceback
sys.path.insert(0, ".")
import importlib.util
spec = importlib.util.spec_from_file_location("untuned_iterators", "../tests/untuned_iterators.py")
untuned = importlib.util.module_from_spec(spec)
spec.loader.exec_module(untuned)
untuned.untune_iterators()

def run(code):
    out, ok, scope = io.StringIO(), True, None
    try:
        with contextlib.redirect_stdout(out):
            scope = code()
    except BaseException:
        ok = False
        out.write(traceback.format_exc())
    return {"ok": ok, "output": out.getvalue()}, scope

for line in sys.stdin:
    job = json.loads(line)
    result, scope = run(lambda: runpy.run_path(job["script"], run_name="__main__"))
    result["solutions"] = [run(lambda: exec(code, scope))[0] for code in job["solutions"]] if scope else []
    import keras, matplotlib.pyplot as plt
    keras.config.set_dtype_policy("float32")
    plt.close("all")
    print("RESULT " + json.dumps(result), flush=True)
"""
OWN_PROCESS = {"11_distributed_training"}  # sets up logical devices before TensorFlow starts


@pytest.fixture(scope="module")
def quick_env(tmp_path_factory, multi30k_dir):
    """The environment of the QUICK runs: one model cache and one figure folder for all of them, and a temporary
    folder of their own (`TMPDIR`), where the test sees what a tutorial leaves behind."""
    return dict(
        os.environ,
        QUICK="1",
        TUTORIAL_OUTPUT_DIR=str(tmp_path_factory.mktemp("tutorial-figures")),
        TUTORIAL_CACHE_DIR=str(tmp_path_factory.mktemp("tutorial-cache")),
        TMPDIR=str(tmp_path_factory.mktemp("tutorial-tmp")),
        MPLBACKEND="Agg",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
    )


@pytest.fixture(scope="module")
def runner(quick_env):
    process = subprocess.Popen([sys.executable, "-u", "-c", _RUNNER], cwd=TUTORIALS, env=quick_env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield process
    process.stdin.close()
    process.wait(timeout=60)


def solutions(script):
    """The Python code blocks of a tutorial's "Solutions" section, in order."""
    text = script.read_text(encoding="utf-8")
    closing = text[text.index("# ## Solutions"):]
    prose = "\n".join(re.sub(r"^# ?", "", line) for line in closing.splitlines())
    return re.findall(r"```python\n(.*?)```", prose, re.S)


def _run_in(runner, script):
    """The runner's result for `script` and its solutions (with what it wrote to stderr before it)."""
    runner.stdin.write(json.dumps({"script": script.name, "solutions": solutions(script)}) + "\n")
    runner.stdin.flush()
    stderr = []
    while True:
        ready, _, _ = select.select([runner.stdout], [], [], TIMEOUT_SECONDS)
        assert ready, f"{script.name} did not finish in {TIMEOUT_SECONDS} s"
        line = runner.stdout.readline()
        assert line, f"the tutorial runner ended while running {script.name}:\n{''.join(stderr)[-3000:]}"
        if not line.startswith("RESULT "):
            stderr.append(line)
            continue
        result = json.loads(line[len("RESULT "):])
        result["output"] += "".join(stderr)
        return result


@pytest.mark.xdist_group("tutorials")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_tutorial_runs_in_quick_mode(script, quick_env, runner):
    """The tutorial runs, writes its figures, and then each exercise solution's code runs after it."""
    if script.stem in OWN_PROCESS:
        with subprocess.Popen([sys.executable, "-u", "-c", _RUNNER], cwd=TUTORIALS, env=quick_env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as own:
            result = _run_in(own, script)
            own.stdin.close()
    else:
        result = _run_in(runner, script)
    assert result["ok"], f"{script.name} failed:\n{result['output'][-6000:]}"
    assert "mode: QUICK" in result["output"]
    figures = pathlib.Path(quick_env["TUTORIAL_OUTPUT_DIR"])
    for name in FIGURES[script.stem]:
        path = figures / name
        assert path.is_file() and path.stat().st_size > 1000, f"{script.name} did not write {name}"
    failed = [f"solution {i}:\n{run['output'][-3000:]}"
              for i, run in enumerate(result["solutions"], 1) if not run["ok"]]
    assert failed == [] and len(result["solutions"]) == len(solutions(script)), f"{script.name}: {failed}"
    # A tutorial's own temporary folders (tutorial 12's export) are gone once it and its solutions have run.
    assert not list(pathlib.Path(quick_env["TMPDIR"]).glob("keras_attention_tutorial_*")), script.name


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_each_figure_is_shown_once_and_each_explorer_has_its_fallback(script):
    """No image twice in a notebook's outputs (a plot function's Figure as the last line of a cell shows
    twice), and every explorer output carries the table a viewer without scripts shows."""
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    outputs = [output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", [])]
    images = [data["image/png"] for data in outputs if "image/png" in data]
    explorers = [data["text/html"] for data in outputs if 'class="ka-explain"' in data.get("text/html", "")]
    assert len(images) == len(set(images)), f"{script.name}: {len(images) - len(set(images))} image(s) twice"
    assert all('<table class="strongest">' in page for page in explorers), script.name


def _cells(notebook):
    return [(cell.cell_type, cell.source) for cell in notebook.cells if cell.cell_type in ("code", "markdown")]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_is_in_sync_with_script(script):
    notebook_path = script.with_suffix(".ipynb")
    assert notebook_path.is_file(), (
        f"{notebook_path.name} is missing: build it with `python tutorials/build_notebooks.py {script.name}`"
    )
    committed = nbformat.read(notebook_path, as_version=4)
    regenerated = jupytext.read(script)
    assert _cells(regenerated) == _cells(committed), (
        f"{notebook_path.name} is out of date: rebuild it with `python tutorials/build_notebooks.py {script.name}`"
    )
    code_cells = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.get("outputs") for c in code_cells[:1]), f"{notebook_path.name} was saved without outputs"


def test_readme_indexes_every_tutorial_and_figure():
    readme = (TUTORIALS / "README.md").read_text(encoding="utf-8")
    for script in SCRIPTS:
        assert script.name in readme and script.with_suffix(".ipynb").name in readme, script.name
        assert any(f"figures/{name}" in readme for name in FIGURES[script.stem]), script.name


# What every tutorial gives a learner (issue 29, item 6): what it teaches and needs at the
# top; a recap, exercises, the papers and the solutions at the bottom, in that order.
OPENING = ("**What you will learn**", "**What you need**")
CLOSING = ("## Recap", "## Exercises", "## Papers", "## Solutions")
PAPER_LINK = re.compile(r"\]\(https://(arxiv\.org/abs/\d{4}\.\d{4,5}|aclanthology\.org/[A-Z]\d{2}-\d{4})/?\)")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_tutorial_has_the_learner_sections(script):
    prose = [c.source for c in jupytext.read(script).cells if c.cell_type == "markdown"]
    opening = prose[1]  # the cell after the title's
    assert all(heading in opening for heading in OPENING), f"{script.name}: the cell after the title lacks {OPENING}"
    closing = prose[-1]
    positions = [closing.find(heading) for heading in CLOSING]
    assert -1 not in positions and positions == sorted(positions), (
        f"{script.name}: the last cell must hold {CLOSING} in this order"
    )
    papers = closing[positions[2]:positions[3]]
    assert PAPER_LINK.search(papers), f"{script.name}: no paper linked (arXiv or ACL Anthology) under ## Papers"
    exercises = closing[positions[1]:positions[2]]
    solutions = closing[positions[3]:]
    count = len(re.findall(r"^\d+\. ", exercises, flags=re.M))
    assert 2 <= count <= 3 and solutions.count("<details>") == count, (
        f"{script.name}: {count} exercises and {solutions.count('<details>')} collapsed solutions"
    )


def test_readme_table_is_generated_from_the_notebooks(tmp_path):
    """The README's table is `build_notebooks.py --index` of the committed notebooks, not typed."""
    spec = importlib.util.spec_from_file_location("build_notebooks", TUTORIALS / "build_notebooks.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    readme = tmp_path / "README.md"
    committed = (TUTORIALS / "README.md").read_text(encoding="utf-8")
    readme.write_text(committed, encoding="utf-8")
    build.write_index(readme)
    assert readme.read_text(encoding="utf-8") == committed, (
        "tutorials/README.md's table is out of date: run `python tutorials/build_notebooks.py --index`"
    )


PUBLIC_MODULES = {"keras_attention", *(f"keras_attention.{name}" for name in (
    "data", "decoding", "explain", "explain.plotting", "layers", "models", "serving", "training"))}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_tutorial_imports_only_the_public_api(script):
    """A learner copies what a tutorial imports: only names some public `__all__` exports."""
    private = []
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras_attention"):
            module = importlib.import_module(node.module)
            exported = module.__all__ if node.module in PUBLIC_MODULES else ()
            private += [f"{node.module}.{a.name}" for a in node.names if a.name not in exported]
        elif isinstance(node, ast.Import):
            private += [a.name for a in node.names if a.name.startswith("keras_attention.")]
    assert not private, f"{script.name} imports names no public __all__ exports: {private}"
