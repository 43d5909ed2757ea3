"""House style that a reader notices: lines within the limit, no lab history (commit hashes) in comments."""

import configparser
import functools
import re
import tokenize
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _limit():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config.getint("flake8", "max-line-length")


@functools.cache
def _inside_long_strings(path):
    """The numbers of the lines that a multi-line string continues onto: in the tests, data such as a compiler's
    output keeps its own lines."""
    with open(path, encoding="utf-8") as f:
        return {number for token in tokenize.generate_tokens(f.readline) if token.type == tokenize.STRING
                for number in range(token.start[0] + 1, token.end[0] + 1)}


def test_lines_are_within_the_limit_of_setup_cfg():
    limit = _limit()
    long_lines = [f"{path.relative_to(ROOT)}:{number}: {len(line)} characters"
                  for folder in ("keras_attention", "scripts", "tests")
                  for path in sorted((ROOT / folder).rglob("*.py"))
                  for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                  if len(line) > limit and not (folder == "tests" and number in _inside_long_strings(path))]
    assert long_lines == []


# A commit hash: 7 to 40 hexadecimal characters holding a digit and a letter.
COMMIT = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def _prose(path):
    """(line, text) of each comment and triple-quoted string (docstrings) of a Python file."""
    with open(path, encoding="utf-8") as f:
        for token in tokenize.generate_tokens(f.readline):
            if token.type == tokenize.COMMENT or (
                    token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''"))):
                yield token.start[0], token.string


def test_comments_and_docstrings_name_no_commit():
    # The lab's history (which commit measured what) belongs to git log and the results pages.
    found = [f"{path.relative_to(ROOT)}:{line}: {match}"
             for folder in ("keras_attention", "scripts")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for line, text in _prose(path) for match in COMMIT.findall(text)]
    assert found == []


def test_the_commit_check_finds_a_hash(tmp_path):
    path = tmp_path / "history.py"
    first, second, third = (format(n, "x") for n in (0x1A2B3C4, 0x5D6E7F8, 0xDEADBEE5))  # made, not cited
    path.write_text(f'"""Faster since {first}."""\nx = "abcdef0123"  # as at {second}\ny = "{third}"\n',
                    encoding="utf-8")
    assert [(line, COMMIT.findall(text)) for line, text in _prose(path)] == [(1, [first]), (2, [second])]
