"""`tutorials/site_pages.py` renders an executed notebook as a site page: prose, code, printed outputs, figures."""

import base64
import importlib.util
import pathlib

import nbformat

PAGES = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "site_pages.py"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))  # what the page's figure file must hold, byte for byte


def _site_pages():
    spec = importlib.util.spec_from_file_location("site_pages", PAGES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_notebook_renders_with_its_outputs_and_figures(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 00 · A title\n\nWhat it teaches, $e_{ij}$."),
        nbformat.v4.new_code_cell("\nprint(1 + 1)", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="2\n"),
            nbformat.v4.new_output("stream", name="stdout", text="3\n")]),  # printed apart, shown together
        nbformat.v4.new_code_cell("plot()", outputs=[  # returned and displayed: the same figure twice
            nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(PNG).decode(),
                                                         "text/plain": "<Figure size 10x10>"}),
            nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(PNG).decode(),
                                                         "text/plain": "<Figure size 10x10>"})]),
        nbformat.v4.new_code_cell("table", outputs=[
            nbformat.v4.new_output("execute_result", data={"text/html": "<table><tr><td>1</td></tr></table>",
                                                           "text/plain": "1"}, execution_count=3)]),
        nbformat.v4.new_code_cell("", outputs=[]),
        nbformat.v4.new_markdown_cell("## Recap\n\n<details><summary>1. Why</summary>\n\n*Because* $x$.\n</details>"),
    ])
    path = tmp_path / "00_example.ipynb"
    nbformat.write(notebook, path)

    page, figures = _site_pages().render(path)

    assert page.startswith('# 00 · A title\n\n!!! tip "Run it yourself"\n')
    assert "[Download this notebook](00_example.ipynb)" in page and "tutorials/_common.py" in page
    assert figures == {"figure_1.png": PNG} and page.count("![Figure") == 1
    expected_order = ["What it teaches, $e_{ij}$.", "```python\nprint(1 + 1)\n```", "```text\n2\n3\n```",
                      "```python\nplot()\n```", "![Figure 1 of 00_example](00_example/figure_1.png)",
                      '<div class="tutorial-output">\n<table><tr><td>1</td></tr></table>\n</div>', "## Recap",
                      '<details markdown="1"><summary>1. Why</summary>']
    positions = [page.index(part) for part in expected_order]
    assert positions == sorted(positions)
    assert "```python\n\n```" not in page  # an empty cell leaves nothing


def test_every_executed_notebook_is_a_page_in_the_navigation():
    nav = (PAGES.parents[1] / "mkdocs.yml").read_text(encoding="utf-8")
    notebooks = _site_pages().notebooks()
    assert len(notebooks) == 12
    assert [n.stem for n in notebooks if f"- tutorials/{n.stem}.md\n" not in nav] == []
