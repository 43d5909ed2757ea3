"""A Ctrl-C that Python drops is sent again: the command line stops on every press.

Python runs a signal's handler in the main thread between two bytecodes,
wherever they are. In a garbage-collection callback or a `__del__` method
the `KeyboardInterrupt` it raises cannot propagate: Python prints "Exception
ignored in ..." with a traceback and goes on. JAX registers such a callback,
and TensorFlow imports JAX when it is installed. `train` defers a press to
the end of a batch while `fit` runs (`keras_attention.training.interrupts`);
this module covers the rest of a command. No Keras import: the command line
loads it before it knows whether it needs Keras.
"""

import contextlib
import os
import signal
import sys
import threading

from keras_attention.base.validation import check_non_negative_float


@contextlib.contextmanager
def resend_dropped_ctrl_c(delay=0.05):
    """Within the block, a Ctrl-C that Python drops is sent again `delay` seconds later.

    Python reports a `KeyboardInterrupt` it cannot raise (in a
    garbage-collection callback or a `__del__`) to `sys.unraisablehook`,
    which prints "Exception ignored" and a traceback. Within the block that
    report is silent, and a timer thread sends SIGINT to the process again
    after `delay` seconds, by when the collection has ended: the second
    `KeyboardInterrupt` reaches the code that was running. A signal not yet
    sent when the block ends (another press stopped it first) is not sent.
    Every other report goes to the hook that was there before.

    Args:
        delay: float >= 0. Seconds before the signal is sent again.
            Defaults to 0.05.

    Example:

    >>> with resend_dropped_ctrl_c():
    ...     pass  # a command's work: a Ctrl-C stops it even during a collection
    """
    check_non_negative_float("delay", delay)
    previous = sys.unraisablehook
    timers = []

    def hook(unraisable):
        if not issubclass(unraisable.exc_type, KeyboardInterrupt):
            return previous(unraisable)
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
        timer.daemon = True
        timer.start()
        timers.append(timer)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        for timer in timers:
            timer.cancel()
