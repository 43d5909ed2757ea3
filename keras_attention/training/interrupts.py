"""A Ctrl-C that always stops training, between two batches.

Python runs a signal's handler in the main thread, between two of its
bytecodes, wherever they are. When they belong to a garbage-collection
callback or a `__del__` method, the `KeyboardInterrupt` that Python's own
handler raises is printed as "Exception ignored in ..." with a traceback, and
dropped: training goes on as if no key had been pressed. JAX registers such a
callback (`_xla_gc_callback`), and TensorFlow imports JAX when it is
installed; with both, about one Ctrl-C in ten was lost during `fit`.

`CtrlC` takes SIGINT while `fit` runs: its handler only notes the press, and
the callback raises `KeyboardInterrupt` at the next batch's end, where
nothing can drop it. Elsewhere (reading data, translating, scoring), the
command line's `keras_attention.cli.ctrl_c.resend_dropped_ctrl_c` sends a
dropped Ctrl-C again a moment later, once the collection is over.
"""

import signal
import threading

import keras


class CtrlC(keras.callbacks.Callback):
    """Turns a Ctrl-C during `fit` into a `KeyboardInterrupt` at the next batch's end.

    Use it as a context manager around `fit` and pass it in `callbacks`.
    While the block runs it is the SIGINT handler: a first press is noted
    and raised at the end of the training or validation batch under way (or
    of the epoch); a second press, before that, raises at once, as Python's
    own handler does. It is only installed in the main thread and when
    SIGINT has Python's default handler; a notebook's or an application's
    own handler is left alone.

    Example:

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> with CtrlC() as ctrl_c:
    ...     history = model.fit(np.ones((4, 2)), np.ones((4, 1)), callbacks=[ctrl_c], verbose=0)
    >>> ctrl_c.pressed
    False
    """

    def __init__(self):
        super().__init__()
        self.pressed = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.pressed:  # pressed again before a batch ended: now
            raise KeyboardInterrupt
        self.pressed = True

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc_info):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _raise_if_pressed(self, *args, **kwargs):
        if self.pressed:
            raise KeyboardInterrupt

    on_train_batch_end = on_test_batch_end = on_epoch_end = _raise_if_pressed
