"""The package's floors: which subpackage may import which, held as one table.

Imports flow one way, base -> layers, data -> models -> decoding -> training,
serving, explain -> cli. A new import across floors either fits the table or
changes it here, where a reviewer sees it.
"""

import ast
import pathlib

import keras_attention

PACKAGE = pathlib.Path(keras_attention.__file__).parent

# Subpackage -> the subpackages it may import (besides itself).
ALLOWED = {
    "base": set(),
    "layers": {"base"},
    "data": {"base"},
    "models": {"base", "layers"},
    "decoding": {"base", "data", "models"},
    "training": {"base", "data", "models", "decoding"},
    "serving": {"base", "data", "models", "decoding"},
    "explain": {"base", "models", "decoding"},
    "cli": {"base", "data", "models", "decoding", "training", "serving", "explain"},
}
# Single modules allowed one more floor: the CTranslate2 exporter reads the layers' weights.
EXCEPTIONS = {("serving.ctranslate2_export", "layers")}


def imported_modules(path, module):
    """Absolute names of the package's modules that the file `path` (module `module`) imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if name.startswith(keras_attention.__name__ + ".")]


# The top level's names loaded on first use, as the modules that hold them.
_LAZY = {f"keras_attention.{name}": module for name, module in
         {**keras_attention._SUBMODULES, **keras_attention._NAMES}.items()}


def crossings(package_dir, name="keras_attention"):
    """`(module, imported floor)` for every import from one subpackage into another."""
    found = set()
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if len(parts) < 2:
            continue  # the top-level __init__ loads the public API by name
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for imported in imported_modules(path, f"{name}.{module}"):
            imported = _LAZY.get(imported, imported)  # `from keras_attention import Translator`: its module
            floor = imported.split(".")[1]
            if floor != parts[0] and (package_dir / floor).is_dir():
                found.add((module, floor))
    return found


def violations(package_dir):
    return sorted((module, floor) for module, floor in crossings(package_dir)
                  if floor not in ALLOWED[module.split(".")[0]] and (module, floor) not in EXCEPTIONS)


def test_every_subpackage_is_in_the_table_and_the_ground_floor_holds_only_init():
    floors = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert floors == set(ALLOWED)
    assert sorted(path.name for path in PACKAGE.glob("*.py")) == ["__init__.py"]


def test_imports_between_subpackages_follow_the_table():
    assert violations(PACKAGE) == []


def test_the_table_is_used_as_written():
    # Every allowed crossing but the CLI's is one the code makes: a stale entry would hide a change of design.
    found = crossings(PACKAGE)
    used = {(module.split(".")[0], floor) for module, floor in found}
    unused = {(floor, other) for floor, others in ALLOWED.items() if floor != "cli" for other in others} - used
    assert unused == set() and EXCEPTIONS <= found


def test_a_model_importing_training_is_caught(tmp_path):
    # The check itself: a small tree with one import against the table.
    for floor in ("base", "models", "training"):
        (tmp_path / floor).mkdir()
        (tmp_path / floor / "__init__.py").write_text("")
    (tmp_path / "models" / "transformer.py").write_text(
        "from keras_attention.base.validation import check_rank\n"
        "from keras_attention.training.losses import MaskedSparseCrossEntropy\n")
    (tmp_path / "training" / "recipe.py").write_text("from ..models import transformer\n")
    (tmp_path / "models" / "factory.py").write_text(
        "def build():\n    from keras_attention import TrainConfig  # inside a function, by its top-level name\n")
    assert crossings(tmp_path) == {("models.transformer", "base"), ("models.transformer", "training"),
                                   ("training.recipe", "models"), ("models.factory", "training")}
    assert violations(tmp_path) == [("models.factory", "training"), ("models.transformer", "training")]
