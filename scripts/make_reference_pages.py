"""Write the site's generated pages: docs/cli.md (every command's `--help`) and docs/changelog.md.

The pages are never edited by hand: after changing a flag or the CHANGELOG, run

    python scripts/make_reference_pages.py

(tests/test_docs.py checks that both pages are what this script writes now).
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH = "100"  # the help's columns, whatever the terminal that runs this


def cli_reference():
    """docs/cli.md: the top-level help, then each command's, in the parser's order, as the parser prints them."""
    from keras_attention.cli.arguments import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {name: _help(command) for name, command in [("", parser), *commands.choices.items()]}
    parts = ["# Command-line reference\n",
             "Every command of `keras-attention` with each option, its meaning and its default, as "
             "`keras-attention COMMAND --help` prints them (generated from the parser by "
             "`python scripts/make_reference_pages.py`). [Training and translating](training.md) "
             "shows them at work.\n",
             "## keras-attention\n", "```text\n" + helps.pop("") + "```\n"]
    for name, text in helps.items():
        parts += [f"## keras-attention {name}\n", "```text\n" + text + "```\n"]
    return "\n".join(parts)


def _help(parser):
    """`parser`'s help wrapped to `WIDTH` columns (argparse reads $COLUMNS), the environment left as it was."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def changelog_page():
    """docs/changelog.md: CHANGELOG.md, its links into docs/ made relative to the site."""
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        text = f.read()
    return re.sub(r"\]\(docs/", "](", text)


PAGES = {"cli.md": cli_reference, "changelog.md": changelog_page}


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for name, make in PAGES.items():
        path = os.path.join(ROOT, "docs", name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(make())
        print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
