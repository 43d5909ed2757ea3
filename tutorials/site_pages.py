"""The docs site's tutorial pages, rendered from the executed notebooks when the site builds (an mkdocs hook).

Each `tutorials/NN_topic.ipynb` becomes the page `tutorials/NN_topic.md`: its
Markdown cells, its code cells and the outputs they printed, its figures as
PNG files beside the page, and a link to download the notebook itself (also
put on the site). Nothing generated is committed: the notebooks are the source,
and `mkdocs build` renders whatever `build_notebooks.py` last executed.
"""

import base64
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
    parts, figures = [], {}
    for cell in cells:
        source = "".join(cell["source"]).rstrip()
        if cell["cell_type"] == "markdown":
            parts.append(source)
            continue
        if cell["cell_type"] != "code":
            continue
        if source:
            parts.append(f"```python\n{source}\n```")
        for output in cell.get("outputs", []):
            parts.extend(_output(output, stem, figures))
    heading, rest = _split_heading(parts)
    links = (f"[Download the notebook]({notebook_path.name}) (its script: `tutorials/{stem}.py`). "
             f"It runs in Jupyter from the repository's `tutorials/` folder, beside `_common.py`, with the "
             f"package installed ([Running them](../tutorials.md#running-them)). The outputs below are the "
             f"notebook's own, from its last execution.")
    return "\n\n".join([heading, links, *rest]) + "\n", figures


def _split_heading(parts):
    """The page's `# title` line (the notebook's first Markdown heading) and everything else."""
    first = parts[0] if parts else ""
    lines = first.splitlines()
    if lines and lines[0].startswith("# "):
        rest_of_first = "\n".join(lines[1:]).strip()
        return lines[0], ([rest_of_first] if rest_of_first else []) + parts[1:]
    return "# Tutorial", parts


def _output(output, stem, figures):
    """The Markdown of one cell output; PNG figures are added to `figures`."""
    kind = output["output_type"]
    if kind == "stream":
        text = "".join(output["text"]).rstrip("\n")
        return [f"```text\n{text}\n```"] if text.strip() else []
    if kind == "error":
        return [f"```text\n{output['ename']}: {output['evalue']}\n```"]
    data = output.get("data", {})
    if "image/png" in data:
        name = f"figure_{len(figures) + 1}.png"
        figures[name] = base64.b64decode("".join(data["image/png"]))
        return [f"![Figure {len(figures)} of {stem}]({stem}/{name})"]
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
