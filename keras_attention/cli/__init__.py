"""The `keras-attention` command line: the only code that reads argv.

`commands` runs each command, `arguments` builds the parser from the library's
options, `demo` is the one-command tour, `reporting` prints a run's summary,
`ctrl_c` makes Ctrl-C stop a command. Nothing else in the package imports it.
"""

from keras_attention.cli.commands import main

__all__ = ["main"]
