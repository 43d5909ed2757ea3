"""The documentation site builds with `mkdocs build --strict`, and documents every public name."""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Public module -> its page under docs/api/.
MODULES = {name: name for name in ("layers", "models", "data", "decoding", "explain", "training", "serving")}
MODULES["explain.plotting"] = "plotting"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]  # a broken link or reference, or a docstring that fails
    return site_dir


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_is_in_the_api_reference(site, module):
    exported = importlib.import_module(f"keras_attention.{module}").__all__
    html = (site / "api" / MODULES[module] / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="(keras_attention\.[\w.]+)"', html))
    # A function documented from its own module (`serving.export.export`) is found there.
    missing = [name for name in exported if f"keras_attention.{module}.{name}" not in anchors
               and f"keras_attention.{module}.{name}.{name}" not in anchors]
    assert not missing, f"not in docs/api/{MODULES[module]}.md: {missing}"


def test_the_models_decoding_step_methods_are_documented(site):
    """`keras_attention.decoding` drives any model with these methods; the Transformer's come from a mixin."""
    html = (site / "api" / "models" / "index.html").read_text(encoding="utf-8")
    methods = {"Transformer": ["init_decoding_state", "init_beam_state", "grow_decoding_state",
                               "reorder_beam_state", "decode_step"],
               "Seq2SeqRNN": ["init_decoding_state", "decode_step"]}
    for model, names in methods.items():
        for method in names:
            assert f'id="keras_attention.models.{model}.{method}"' in html, (model, method)


def test_every_page_is_in_the_navigation_and_the_results_are_generated(site):
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    nav = (ROOT / "mkdocs.yml").read_text()
    assert not [p for p in pages if p not in nav], "pages missing from mkdocs.yml's nav"
    results = (site / "results" / "index.html").read_text(encoding="utf-8")
    assert "target tokens/s" in results and "scripts/benchmark_data.py" in results


def test_every_tutorial_is_a_page_with_its_outputs_figures_and_notebook(site):
    """tutorials/site_pages.py renders each executed notebook: each distinct PNG output once, the notebook downloadable;
    the collapsed solutions' Markdown is rendered (md_in_html)."""
    for notebook in sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        outputs = [o.get("data", {}) for c in cells for o in c.get("outputs", [])]
        pngs = len({data["image/png"] for data in outputs if "image/png" in data})
        page = (site / "tutorials" / notebook.stem / "index.html").read_text(encoding="utf-8")
        assert len(re.findall(r'<img alt="Figure \d+ of ', page)) == pngs, notebook.name
        assert (site / "tutorials" / notebook.name).read_bytes() == notebook.read_bytes()
        assert f'href="../{notebook.name}"' in page, notebook.name
        assert "mode: full" in page, f"{notebook.name} was executed with QUICK=1: the site shows full runs"
    bahdanau = (site / "tutorials" / "02_bahdanau_attention" / "index.html").read_text(encoding="utf-8")
    assert '<span class="arithmatex">' in bahdanau  # the formulas go to MathJax, not to the Markdown parser
    luong = (site / "tutorials" / "03_luong_attention" / "index.html").read_text(encoding="utf-8")
    solutions = luong[luong.index("<details"):]
    assert "<code>" in solutions and "$h_t" not in solutions  # Markdown and formulas inside <details> rendered


def test_the_getting_started_page_gives_the_readme_quick_start_commands():
    def commands(text, heading):
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        return [block.split("```", 1)[0].strip() for block in section.split("```bash\n")[1:]]

    readme = commands((ROOT / "README.md").read_text(encoding="utf-8"), "## Quick start")
    page = commands((ROOT / "docs" / "index.md").read_text(encoding="utf-8"), "## Two commands")
    assert len(readme) == 2 and [c for c in page if c in readme] == readme, (readme, page)


def test_the_generated_pages_are_current_and_on_the_site(site):
    """docs/cli.md (every command's --help), docs/changelog.md and the README's and docs' TF Serving examples are what
    scripts/make_reference_pages.py writes from the parser, CHANGELOG.md and benchmarks/serving_reply.json now."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_reference_pages

    for name, make in make_reference_pages.PAGES.items():
        assert (ROOT / "docs" / name).read_text(encoding="utf-8") == make(), (
            f"docs/{name} is stale: run python scripts/make_reference_pages.py")
    for name in make_reference_pages.BLOCK_PAGES:  # the serving examples of benchmarks/serving_reply.json
        text = (ROOT / name).read_text(encoding="utf-8")
        assert make_reference_pages.with_blocks(name, text) == text, f"{name}: run scripts/make_reference_pages.py"
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("train", "prepare", "evaluate", "translate", "explain", "demo", "average-checkpoints", "export"):
        assert f"keras-attention {command}" in cli, command
    assert "--beam-size" in cli and "(default: transformer)" in cli
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "0.3.0" in changelog and 'href="../results/#training-speed"' in changelog


def test_the_troubleshooting_page_quotes_messages_the_code_gives():
    """Each quoted message of docs/troubleshooting.md's table occurs in the package's source, as written."""
    rows = [line for line in (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    source = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "keras_attention").rglob("*.py"))
    quoted = [row[3:].split("` ", 1)[0].split("` |", 1)[0] for row in rows]
    assert len(quoted) >= 12
    for message in quoted:
        fragments = [part.strip() for part in message.split("...") if part.strip(" .()")]
        assert fragments and all(part in source for part in fragments), message
