"""The parts of the library that run on the TensorFlow backend only, and the error they give elsewhere.

The layers and the models are `keras.ops` and run on every Keras backend.
Decoding (`Translator`), the training recipe (`tf.data`, `tf.distribute`),
SavedModel export and serving, and the command-line interface are written
against TensorFlow; under another backend they stop at once with one line
saying so, instead of failing deep inside.
"""

import json
import os
import sys

__all__ = ["BackendError", "require_tensorflow"]


class BackendError(RuntimeError):
    """A TensorFlow-only feature was used under another Keras backend."""


def require_tensorflow(feature):
    """Raise `BackendError` naming `feature` unless Keras runs (or, not yet imported, will run) on TensorFlow.

    Before Keras is imported, the backend is read as Keras reads it, without
    importing it (which would start TensorFlow): so the command line refuses
    another backend at once.

    Example:

    >>> require_tensorflow("SavedModel export")  # on the TensorFlow backend: nothing happens
    """
    keras = sys.modules.get("keras")
    backend = keras.backend.backend() if keras is not None else configured_backend()
    if backend != "tensorflow":
        raise BackendError(
            f"{feature} runs on Keras' TensorFlow backend only; this process uses the {backend!r} backend "
            "(set KERAS_BACKEND=tensorflow, or use the layers and models alone)"
        )


def configured_backend():
    """The backend Keras will start with: `KERAS_BACKEND`, else `keras.json`'s, else TensorFlow (Keras' order)."""
    if "KERAS_BACKEND" in os.environ:
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(
        os.path.expanduser("~") if os.access(os.path.expanduser("~"), os.W_OK) else "/tmp", ".keras")
    try:
        with open(os.path.join(os.path.expanduser(home), "keras.json"), encoding="utf-8") as f:
            return json.load(f).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"
