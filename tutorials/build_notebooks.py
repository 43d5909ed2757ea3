"""Build the tutorial notebooks from their scripts and run them so they keep their outputs.

    python tutorials/build_notebooks.py                 # all tutorials, full mode
    python tutorials/build_notebooks.py 02 09           # some of them (by number or file name)
    python tutorials/build_notebooks.py --quick 11      # QUICK=1 (the first cell says so)
    python tutorials/build_notebooks.py --prose-only 02 # Markdown edits only: no re-run
    python tutorials/build_notebooks.py --imports-only 09  # the same objects imported from elsewhere
    python tutorials/build_notebooks.py --index            # README's table, from the executed notebooks

The scripts (`NN_topic.py`, jupytext percent format) are the source; each
notebook is `jupytext.read(script)` executed top to bottom in the `tutorials/`
folder by a Python 3 Jupyter kernel (needs `nbclient` and `ipykernel`, in the
`dev` extra). The figures go to `tutorials/figures/` unless
`TUTORIAL_OUTPUT_DIR` says otherwise. `tests/tutorials` checks that each
committed notebook has the same cells as its script.
"""

import argparse
import ast
import os
import re
import pathlib
import sys
import time

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent


def scripts(selection):
    every = sorted(HERE.glob("[0-9][0-9]_*.py"))
    if not selection:
        return every
    chosen = [s for s in every if any(s.name.startswith(x) or s.name == x for x in selection)]
    missing = [x for x in selection if not any(s.name.startswith(x) or s.name == x for s in every)]
    if missing:
        sys.exit(f"no tutorial matches {missing}")
    return chosen


# TensorFlow's C++ start-up lines (absl, oneDNN, CUDA probing) go to stderr whatever
# TF_CPP_MIN_LOG_LEVEL says, and its Python logger reports every all-reduce and
# asset write at INFO level; they describe the build machine, not the tutorial.
NOISE = ("WARNING: All log messages before absl::InitializeLog()", "I0000 ", "W0000 ", "E0000 ",
         "INFO:tensorflow:")


def drop_startup_noise(notebook):
    for cell in notebook.cells:
        outputs = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                lines = [line for line in output["text"].splitlines(keepends=True) if not line.startswith(NOISE)]
                if not "".join(lines).strip():
                    continue
                output["text"] = "".join(lines)
            outputs.append(output)
        if cell.cell_type == "code":
            cell.outputs = outputs


def build(script, timeout=None):
    notebook = jupytext.read(script)
    notebook.metadata.pop("jupytext", None)  # the notebook is generated, not paired
    started = time.time()
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    drop_startup_noise(notebook)
    nbformat.write(notebook, script.with_suffix(".ipynb"))
    return time.time() - started


def update_prose(script):
    """Make the notebook the script's cells again, keeping every code cell's outputs.

    Only for changes to prose (Markdown cells edited, added or removed): the
    code cells must be the same, in the same order, or this refuses (the
    outputs would no longer be the code's).
    """
    fresh = jupytext.read(script)
    fresh.metadata.pop("jupytext", None)
    path = script.with_suffix(".ipynb")
    notebook = nbformat.read(path, as_version=4)
    executed = [c for c in notebook.cells if c.cell_type == "code"]
    if [c.source for c in fresh.cells if c.cell_type == "code"] != [c.source for c in executed]:
        sys.exit(f"{script.name}: its code cells changed since the notebook ran; build it again")
    ids = {c.source: c.id for c in notebook.cells if c.cell_type == "markdown"}
    for cell in fresh.cells:
        if cell.cell_type == "markdown":
            cell.id = ids.get(cell.source, cell.id)  # unchanged prose keeps its id: a smaller diff
    ran = iter(executed)
    notebook.cells = [next(ran) if cell.cell_type == "code" else cell for cell in fresh.cells]
    nbformat.write(notebook, path)


def _imports_and_rest(source):
    """A code cell's top-level import statements (as source) and the dump of everything else."""
    tree = ast.parse(source)
    imports = [ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    rest = [ast.dump(n) for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    return imports, rest


def _bound(imports):
    """Run import statements in a fresh namespace (in `tutorials/`); return what they bind."""
    namespace = {}
    exec("\n".join(imports), namespace)  # noqa: S102  (our own tutorials' import lines)
    namespace.pop("__builtins__", None)
    return namespace


def update_imports(script):
    """Copy the script's new import statements into its executed notebook, keeping every output.

    Refuses unless every changed code cell differs only in its import
    statements and those bind the same names to the very same objects as
    before (checked by running both here): the outputs are then still the
    code's. Markdown cells are copied as with `--prose-only`.
    """
    fresh = jupytext.read(script)
    path = script.with_suffix(".ipynb")
    notebook = nbformat.read(path, as_version=4)
    executed = [c for c in notebook.cells if c.cell_type == "code"]
    new_code = [c for c in fresh.cells if c.cell_type == "code"]
    if len(executed) != len(new_code):
        sys.exit(f"{script.name}: code cells were added or removed; build it again")
    sys.path.insert(0, str(HERE))
    for old, new in zip(executed, new_code):
        if old.source == new.source:
            continue
        (old_imports, old_rest), (new_imports, new_rest) = _imports_and_rest(old.source), _imports_and_rest(new.source)
        before, after = _bound(old_imports), _bound(new_imports)
        same = before.keys() == after.keys() and all(before[k] is after[k] for k in before)
        if old_rest != new_rest or not same:
            sys.exit(f"{script.name}: a code cell changed more than where its names are imported from; build it again")
        old.source = new.source
    nbformat.write(notebook, path)
    update_prose(script)


INDEX_START = "<!-- generated by build_notebooks.py --index -->"
INDEX_END = "<!-- end of generated table -->"


def _minutes(notebook):
    """Wall-clock of the notebook's run, from the execution times nbclient records."""
    times = [c.metadata.get("execution", {}) for c in notebook.cells if c.cell_type == "code"]
    started = [t["iopub.execute_input"] for t in times if "iopub.execute_input" in t]
    ended = [t["shell.execute_reply"] for t in times if "shell.execute_reply" in t]
    if not started or not ended:
        return "not recorded"
    parse = lambda s: time.mktime(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S"))  # noqa: E731
    seconds = parse(max(ended)) - parse(min(started))
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def index_row(script):
    """One line of the README's table, from the script and its executed notebook."""
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    prose = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    title = prose[0].splitlines()[0].split("·", 1)[1].strip()
    learn = prose[1].split("**What you need**")[0]
    points = [" ".join(line.strip(" *").split()) for line in
              "\n".join(learn.splitlines()[1:]).replace("\n  ", " ").splitlines() if line.startswith("* ")]
    outputs = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []))
    results = [line[len("result: "):] for line in outputs.splitlines() if line.startswith("result: ")]
    mode = "QUICK mode" if "mode: QUICK" in outputs else ""
    device = next((line[len("device: "):] for line in outputs.splitlines() if line.startswith("device: ")), "")
    figure = next(iter(re.findall(r'figure_path\(f?"([^"{]+\.png)"\)', script.read_text(encoding="utf-8"))), None)
    number = script.name[:2]
    files = f"[`{script.name}`]({script.name}) · [notebook]({script.with_suffix('.ipynb').name})"
    cells = [number, f"**{title}**<br>{files}", "; ".join(p.rstrip(";.") for p in points),
             (results[0] if results else "") + (f" ({mode})" if mode and results else ""),
             f"{_minutes(notebook)}" + (f", {device}" if device else ""),
             f"![](figures/{figure})" if figure else ""]
    return "| " + " | ".join(cells) + " |"


def write_index(readme=HERE / "README.md"):
    """Replace the table between the README's markers with one generated from the notebooks."""
    text = readme.read_text(encoding="utf-8")
    if INDEX_START not in text or INDEX_END not in text:
        sys.exit(f"{readme}: add the lines {INDEX_START!r} and {INDEX_END!r} around the table")
    table = ["| # | tutorial | what you will learn | result | run time, device | figure |",
             "|---|---|---|---|---|---|", *(index_row(s) for s in scripts([]))]
    head, rest = text.split(INDEX_START, 1)
    tail = rest.split(INDEX_END, 1)[1]
    readme.write_text(head + INDEX_START + "\n" + "\n".join(table) + "\n" + INDEX_END + tail, encoding="utf-8")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tutorials", nargs="*", help="numbers or file names (default: all)")
    parser.add_argument("--quick", action="store_true", help="run with QUICK=1")
    parser.add_argument("--prose-only", action="store_true",
                        help="copy edited Markdown cells into the notebooks without running them")
    parser.add_argument("--index", action="store_true",
                        help="write the README's table of tutorials from the executed notebooks")
    parser.add_argument("--imports-only", action="store_true",
                        help="copy import statements that bind the same objects, without running the notebooks")
    args = parser.parse_args(argv)
    if args.index:
        write_index()
        return
    if args.imports_only:
        for script in scripts(args.tutorials):
            update_imports(script)
            print(f"{script.name}: imports copied", flush=True)
        return
    if args.prose_only:
        for script in scripts(args.tutorials):
            update_prose(script)
            print(f"{script.name}: prose copied", flush=True)
        return
    if args.quick:
        os.environ["QUICK"] = "1"
    else:
        os.environ.pop("QUICK", None)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for script in scripts(args.tutorials):
        print(f"{script.name} ...", end=" ", flush=True)
        seconds = build(script)
        print(f"{seconds:.0f} s -> {script.with_suffix('.ipynb').name}", flush=True)


if __name__ == "__main__":
    main()
