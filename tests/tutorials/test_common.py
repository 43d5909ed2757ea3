"""tutorials/_common.py: the training clock of tutorial 10's race records the learning rate each step used."""

import importlib.util
import pathlib
import warnings

import keras
import numpy as np

COMMON = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "_common.py"


def load_common():
    spec = importlib.util.spec_from_file_location("tutorial_common", COMMON)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # the warning filters the module sets stay with it
        spec.loader.exec_module(module)
    return module


class OneTenthPerStep(keras.optimizers.schedules.LearningRateSchedule):
    """0.1 at the first step, 0.2 at the second, ..."""

    def __call__(self, step):
        return 0.1 * (keras.ops.cast(step, "float32") + 1.0)


def test_the_clock_records_the_rate_each_step_used():
    clock = load_common().TrainingClock(seconds=1e9, checkpoints=1)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(OneTenthPerStep()), "mse")
    model.fit(np.ones((3, 2)), np.ones((3, 1)), batch_size=1, epochs=1, verbose=0, shuffle=False, callbacks=[clock])
    np.testing.assert_allclose(clock.rates, [0.1, 0.2, 0.3], rtol=1e-6)  # not the rate of the step after each
