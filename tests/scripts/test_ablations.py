"""scripts/ablations/: each one-off experiment still starts, and its README line records its answer."""

import importlib.util
import pathlib

import pytest

FOLDER = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ablations"
SCRIPTS = sorted(FOLDER.glob("*.py"))


def test_the_readme_has_one_line_per_script():
    rows = [line for line in (FOLDER / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [script.name for script in SCRIPTS]
    assert all(row.count("|") == 5 for row in rows)  # question, answer and figures filled in


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_the_script_imports_and_prints_its_help(script, capsys):
    spec = importlib.util.spec_from_file_location(f"ablation_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # its imports (the package, scripts/) resolve from the new folder
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out
