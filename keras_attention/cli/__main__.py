"""`python -m keras_attention.cli ...`, as the `keras-attention` script."""

import sys

from keras_attention.cli.commands import main

sys.exit(main())
