"""`build_notebooks --prose-only / --imports-only` keep a notebook's outputs only when they are still the code's."""

import importlib.util
import pathlib

import jupytext
import nbformat
import pytest

BUILD = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "build_notebooks.py"
SCRIPT = """# %% [markdown]
# # A title

# %%
from os import path

print(path.join("a", "b"))
"""


@pytest.fixture()
def build():
    spec = importlib.util.spec_from_file_location("build_notebooks", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _executed(tmp_path, source):
    """The script and a notebook of it whose code cell holds an output, as if it had run."""
    script = tmp_path / "00_example.py"
    script.write_text(source, encoding="utf-8")
    notebook = jupytext.read(script)
    notebook.metadata.pop("jupytext", None)
    code = next(c for c in notebook.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="a/b\n")]
    nbformat.write(notebook, script.with_suffix(".ipynb"))
    return script


def _code(script):
    return next(c for c in nbformat.read(script.with_suffix(".ipynb"), as_version=4).cells if c.cell_type == "code")


def test_added_prose_keeps_the_outputs(build, tmp_path):
    script = _executed(tmp_path, SCRIPT)
    script.write_text(SCRIPT + "\n# %% [markdown]\n# ## Recap\n", encoding="utf-8")
    build.update_prose(script)
    cells = nbformat.read(script.with_suffix(".ipynb"), as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "code", "markdown"] and _code(script).outputs


def test_prose_only_refuses_changed_code(build, tmp_path):
    script = _executed(tmp_path, SCRIPT)
    script.write_text(SCRIPT.replace('"b"', '"c"'), encoding="utf-8")
    with pytest.raises(SystemExit, match="code cells changed"):
        build.update_prose(script)


def test_an_import_of_the_same_object_from_elsewhere_keeps_the_outputs(build, tmp_path):
    script = _executed(tmp_path, SCRIPT)
    script.write_text(SCRIPT.replace("from os import path", "import os.path as path"), encoding="utf-8")
    build.update_imports(script)
    assert _code(script).source.startswith("import os.path as path") and _code(script).outputs


@pytest.mark.parametrize("change", [
    ("from os import path", "from os import sep as path"),  # another object under the same name
    ('"b"', '"c"'),  # not an import
])
def test_imports_only_refuses_anything_else(build, tmp_path, change):
    script = _executed(tmp_path, SCRIPT)
    script.write_text(SCRIPT.replace(*change), encoding="utf-8")
    with pytest.raises(SystemExit, match="changed more than where its names are imported from"):
        build.update_imports(script)
    assert _code(script).source == 'from os import path\n\nprint(path.join("a", "b"))'  # untouched
