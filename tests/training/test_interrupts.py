import signal
import threading

import keras
import numpy as np
import pytest

from keras_attention.training.interrupts import CtrlC

STEPS = 6


class _CollectAt(keras.callbacks.Callback):
    """Calls `press` at the end of batch `at_batch`; counts the batches that ended."""

    def __init__(self, at_batch, press):
        super().__init__()
        self.at_batch = at_batch
        self.press = press
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if batch == self.at_batch:
            self.press()


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _fit(callbacks, model=None):
    model = model or _model()
    x = np.ones((STEPS, 2), "float32")
    model.fit(x, x[:, :1], batch_size=1, epochs=1, callbacks=callbacks, verbose=0)


def test_a_ctrl_c_python_drops_goes_unnoticed_without_it(python_sigint_handler, dropped, press_during_a_collection):
    """The failure CtrlC is for, shown: the interrupt is lost and fit runs to its end."""
    counter = _CollectAt(1, press_during_a_collection)
    _fit([counter])
    assert dropped == [KeyboardInterrupt]
    assert counter.batches == STEPS


def test_a_ctrl_c_during_a_collection_stops_fit_at_the_next_batch(python_sigint_handler, dropped,
                                                                  press_during_a_collection):
    counter = _CollectAt(1, press_during_a_collection)
    with pytest.raises(KeyboardInterrupt):
        with CtrlC() as ctrl_c:
            _fit([ctrl_c, counter])
    assert dropped == [] and ctrl_c.pressed  # nothing printed, nothing lost
    assert counter.batches == 2  # batch 0, then batch 1 (the press); batch 2 ended in the interrupt
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


class _PressAt(keras.callbacks.Callback):
    """Presses Ctrl-C `presses` times as batch 0 begins."""

    def __init__(self, presses):
        super().__init__()
        self.presses = presses

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            for _ in range(self.presses):
                signal.raise_signal(signal.SIGINT)


def test_a_press_lets_the_batch_under_way_finish_and_a_second_press_stops_at_once(python_sigint_handler):
    for presses, steps_done in [(1, 1), (2, 0)]:
        model = _model()
        with pytest.raises(KeyboardInterrupt):
            with CtrlC() as ctrl_c:
                _fit([ctrl_c, _PressAt(presses)], model)
        assert ctrl_c.pressed
        assert int(model.optimizer.iterations) == steps_done, presses


def test_leaves_another_handler_alone():
    def own(signum, frame):
        own.calls += 1

    own.calls = 0
    previous = signal.signal(signal.SIGINT, own)
    try:
        with CtrlC() as ctrl_c:
            assert signal.getsignal(signal.SIGINT) is own
            signal.raise_signal(signal.SIGINT)
        assert own.calls == 1 and not ctrl_c.pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_it_changes_nothing(python_sigint_handler):
    seen = []

    def enter():
        with CtrlC():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]
