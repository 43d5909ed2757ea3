"""House style that a reader notices: no line in the package or the scripts is longer than the limit."""

import configparser
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _limit():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config.getint("flake8", "max-line-length")


def test_lines_are_within_the_limit_of_setup_cfg():
    limit = _limit()
    long_lines = [f"{path.relative_to(ROOT)}:{number}: {len(line)} characters"
                  for folder in ("keras_attention", "scripts")
                  for path in sorted((ROOT / folder).rglob("*.py"))
                  for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                  if len(line) > limit]
    assert long_lines == []
