"""The docs site's tutorial pages, rendered from the executed notebooks when the site builds (an mkdocs hook).

Each `tutorials/NN_topic.ipynb` becomes the page `tutorials/NN_topic.md`: its
Markdown cells, its code cells and the outputs they printed, its figures as
PNG files beside the page, and a link to download the notebook itself (also
put on the site). Nothing generated is committed: the notebooks are the source,
and `mkdocs build` renders whatever `build_notebooks.py` last executed.
"""

import base64
import hashlib
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def notebooks():
    """The executed tutorial notebooks, in their order."""
    return sorted(HERE.glob("[0-9][0-9]_*.ipynb"))


def render(notebook_path):
    """`notebook_path` as a Markdown page: `(markdown, {file name: PNG bytes})`, the figures' names relative to
    the folder named after the notebook (`NN_topic/figure_K.png`), which the page links to."""
    notebook_path = pathlib.Path(notebook_path)
    cells = json.loads(notebook_path.read_text(encoding="utf-8"))["cells"]
    stem = notebook_path.stem
    parts, figures, shown = [], {}, set()
    for cell in cells:
        source = "".join(cell["source"]).strip("\n").rstrip()
        if cell["cell_type"] == "markdown":
            parts.append(source.replace("<details>", '<details markdown="1">'))  # its Markdown rendered too
            continue
        if cell["cell_type"] != "code":
            continue
        if source:
            parts.append(f"```python\n{source}\n```")
        for output in _merged(cell.get("outputs", [])):
            parts.extend(_output(output, stem, figures, shown))
    heading, rest = _split_heading(parts)
    return "\n\n".join([heading, _how_to_run(notebook_path), *rest]) + "\n", figures


def _how_to_run(notebook_path):
    """The note at the top of a page: where the notebook is and what it needs to run."""
    return (f'!!! tip "Run it yourself"\n'
            f"    Clone the repository, `pip install -e .` and `pip install jupyter` in it, then open "
            f"`tutorials/{notebook_path.name}` (it imports `tutorials/_common.py`, so keep the two together) or "
            f"run `python tutorials/{notebook_path.stem}.py`; see [Running them](../tutorials.md#running-them). "
            f"[Download this notebook]({notebook_path.name}). The outputs below are the notebook's own, from its "
            f"last run.")


def _merged(outputs):
    """The outputs with consecutive prints to the same stream joined, as a notebook shows them."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output["output_type"] == "stream" and previous and previous["output_type"] == "stream"
                and previous["name"] == output["name"]):
            merged[-1] = dict(previous, text="".join(previous["text"]) + "".join(output["text"]))
        else:
            merged.append(output)
    return merged


def _split_heading(parts):
    """The page's `# title` line (the notebook's first Markdown heading) and everything else."""
    first = parts[0] if parts else ""
    lines = first.splitlines()
    if lines and lines[0].startswith("# "):
        rest_of_first = "\n".join(lines[1:]).strip()
        return lines[0], ([rest_of_first] if rest_of_first else []) + parts[1:]
    return "# Tutorial", parts


def _output(output, stem, figures, shown):
    """The Markdown of one cell output; PNG figures are added to `figures`, once each (`shown`: their digests)."""
    kind = output["output_type"]
    if kind == "stream":
        text = "".join(output["text"]).strip("\n")
        return [f"```text\n{text}\n```"] if text.strip() else []
    if kind == "error":
        return [f"```text\n{output['ename']}: {output['evalue']}\n```"]
    data = output.get("data", {})
    if "image/png" in data:
        png = base64.b64decode("".join(data["image/png"]))
        digest = hashlib.sha256(png).hexdigest()
        if digest in shown:  # a figure a cell displayed twice (returned and shown) is shown once
            return []
        shown.add(digest)
        name = f"figure_{len(figures) + 1}.png"
        figures[name] = png
        return [f"![Figure {len(figures)} of {stem}]({stem}/{name})"]
    if "text/markdown" in data:
        return ["".join(data["text/markdown"]).strip("\n")]
    if "text/html" in data:
        return ['<div class="tutorial-output">\n' + "".join(data["text/html"]).strip() + "\n</div>"]
    if "text/plain" in data:
        return ["```text\n" + "".join(data["text/plain"]).rstrip("\n") + "\n```"]
    return []


def on_files(files, config):
    """mkdocs hook: add each notebook's page, figures and the notebook file to the site's files."""
    from mkdocs.structure.files import File

    for path in notebooks():
        markdown, figures = render(path)
        files.append(File.generated(config, f"tutorials/{path.stem}.md", content=markdown))
        files.append(File.generated(config, f"tutorials/{path.name}", abs_src_path=str(path)))
        for name, png in figures.items():
            files.append(File.generated(config, f"tutorials/{path.stem}/{name}", content=png))
    return files
