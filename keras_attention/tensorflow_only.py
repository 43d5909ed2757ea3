"""The parts of the library that run on the TensorFlow backend only, and the error they give elsewhere.

The layers and the models are `keras.ops` and run on every Keras backend.
Decoding (`Translator`), the training recipe (`tf.data`, `tf.distribute`),
SavedModel export and serving, and the command-line interface are written
against TensorFlow; under another backend they stop at once with one line
saying so, instead of failing deep inside.
"""

__all__ = ["BackendError", "require_tensorflow"]


class BackendError(RuntimeError):
    """A TensorFlow-only feature was used under another Keras backend."""


def require_tensorflow(feature):
    """Raise `BackendError` naming `feature` unless Keras runs on TensorFlow.

    Example:

    >>> require_tensorflow("SavedModel export")  # on the TensorFlow backend: nothing happens
    """
    import keras  # here, not at the top: the command line imports this module before it quiets TensorFlow

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise BackendError(
            f"{feature} runs on Keras' TensorFlow backend only; this process uses the {backend!r} backend "
            "(set KERAS_BACKEND=tensorflow, or use the layers and models alone)"
        )
