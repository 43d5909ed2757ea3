"""The `keras-attention` command line: the only code that reads argv or prints for people.

`commands` runs each command, `arguments` builds the parser from the library's
options, `demo` is the one-command tour, `reporting` prints a run's summary,
`ctrl_c` and `xla_cache` are the process-wide settings a command takes.
Nothing outside this package imports it.
"""

from keras_attention.cli.commands import main

__all__ = ["main"]
