import sys
import time

import pytest

from keras_attention.cli import commands as cli
from keras_attention.cli.ctrl_c import resend_dropped_ctrl_c


def _work(seconds=5.0):
    """A command's work between two presses: Python bytecode for up to `seconds`; the seconds it ran."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        time.sleep(0.01)
    return time.monotonic() - start


def test_without_it_a_ctrl_c_during_a_collection_is_lost(python_sigint_handler, dropped, press_during_a_collection):
    press_during_a_collection()
    assert _work(0.5) >= 0.5  # the work ran to its end
    assert dropped == [KeyboardInterrupt]


def test_a_dropped_ctrl_c_is_sent_again_and_stops_the_work(python_sigint_handler, dropped, press_during_a_collection):
    hook = sys.unraisablehook
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with resend_dropped_ctrl_c(delay=0.05):
            press_during_a_collection()
            _work(5.0)
    assert time.monotonic() - start < 4.0  # stopped by the second signal, not by the end of the work
    assert dropped == []  # nothing printed
    assert sys.unraisablehook is hook  # restored


def test_a_signal_not_yet_sent_when_the_block_ends_is_not_sent(python_sigint_handler, dropped,
                                                               press_during_a_collection):
    with pytest.raises(KeyboardInterrupt):
        with resend_dropped_ctrl_c(delay=0.3):
            press_during_a_collection()
            raise KeyboardInterrupt  # a second press, before the first one is sent again
    assert _work(0.6) >= 0.6  # no late signal interrupts what comes after


def test_other_exceptions_python_drops_go_to_the_hook_that_was_there(dropped):
    class FailsWhenCollected:
        def __del__(self):
            raise ValueError("in __del__")

    with resend_dropped_ctrl_c():
        FailsWhenCollected()
    assert dropped == [ValueError]


def test_the_delay_is_checked():
    with pytest.raises(ValueError, match=r"`delay` must be a number >= 0. Received: delay=-1"):
        with resend_dropped_ctrl_c(delay=-1):
            pass


def test_the_command_line_stops_on_a_ctrl_c_python_dropped(python_sigint_handler, dropped, press_during_a_collection,
                                                           monkeypatch, capsys):
    def run(args):
        press_during_a_collection()
        _work(5.0)
        return 0

    monkeypatch.setattr(cli, "_run", run)
    assert cli.main(["translate", "some/translator", "ein Hund"]) == 130
    assert capsys.readouterr().err.strip() == "keras-attention translate: interrupted."
    assert dropped == []
