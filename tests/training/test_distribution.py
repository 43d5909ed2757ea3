"""Strategies: 2 replicas train like 1 device; 2 workers end identical; the helpers' checks.

The multi-device and multi-worker runs happen in child processes
(`distributed_worker.py`): devices must be configured before TensorFlow
starts, and this pytest process has started it already.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.training import distribution, optimizers
from tests.training import distributed_worker, subprocesses

WORKER = os.path.join(subprocesses.HERE, "distributed_worker.py")


def test_two_replicas_match_one_device(tmp_path):
    out = tmp_path / "replicas.json"
    process = subprocesses.start([WORKER, "replicas", str(out)], tmp_path / "replicas.log")
    assert subprocesses.finish([process], timeout=900) == [0], subprocesses.logs([process])
    results = json.loads(out.read_text())
    assert set(results) == {"transformer/sgd", "bahdanau/sgd_clipnorm"}
    for case, r in results.items():
        assert r["replicas"] == 2
        assert r["max_update"] > 1e-3, case  # the epoch did move the weights
        assert abs(r["loss_1"] - r["loss_2"]) < 1e-4, (case, r)
        assert abs(r["accuracy_1"] - r["accuracy_2"]) < 1e-6, (case, r)
        assert r["max_weight_diff"] < 1e-4, (case, r)


def test_two_workers_end_with_identical_weights(tmp_path):
    processes = []
    try:
        processes += subprocesses.start_workers(
            2, lambda index: [WORKER, "worker", str(tmp_path / f"w{index}.npz")], tmp_path)
        distributed_worker.train_worker(str(tmp_path / "one.npz"), "default")  # the reference, meanwhile here
        codes = subprocesses.finish(processes, timeout=600)
    finally:
        for p in processes:
            subprocesses.kill(p)
    assert codes == [0, 0], subprocesses.logs(processes)
    w0, w1, one = (np.load(tmp_path / f"{name}.npz") for name in ("w0", "w1", "one"))
    assert int(w0["replicas"]) == 2 and int(one["replicas"]) == 1
    assert int(w0["steps"]) == int(w1["steps"]) == int(one["steps"]) == 6
    paths = [k.removeprefix("weights/") for k in w0.files if k.startswith("weights/")]
    compared = {str(p) for p in w0["compared"]}  # all but the key biases (`matches_one_device`)
    assert compared < set(paths) and len(compared) > len(paths) // 2
    for path in paths:
        np.testing.assert_array_equal(w0[f"weights/{path}"], w1[f"weights/{path}"], err_msg=path)
        if path in compared:
            np.testing.assert_allclose(w0[f"weights/{path}"], one[f"weights/{path}"], atol=1e-4, err_msg=path)
    np.testing.assert_allclose(w0["loss"], one["loss"], atol=1e-4)


def test_get_strategy_checks_its_arguments(monkeypatch):
    with pytest.raises(ValueError, match="strategy"):
        distribution.get_strategy("horovod")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG unset"):
        distribution.get_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG="):
        distribution.get_strategy("multi_worker")


def test_default_strategy_is_chief_and_allows_xla():
    strategy = distribution.get_strategy("default")
    assert strategy.num_replicas_in_sync == 1
    assert distribution.is_chief(strategy)
    assert distribution.task_name(strategy) == "chief"
    assert distribution.xla_supported(strategy)
    if len(tf.config.list_logical_devices("GPU")) < 2:  # "auto" mirrors over 2+ GPUs only
        assert distribution.get_strategy("auto").num_replicas_in_sync == 1


def test_clipnorm_uses_the_norm_of_the_dense_gradient():
    # A token seen twice gives two slices for one row: Keras clips by the norm
    # of the slices (sqrt(2)), ours by the norm of the summed row (2).
    grad = tf.IndexedSlices(tf.constant([[1.0], [1.0]]), tf.constant([0, 0]), tf.constant([2, 1]))
    ours = optimizers.SGD(1.0, clipnorm=1.0)._clip_gradients([grad])[0]
    np.testing.assert_allclose(ours.numpy().ravel(), [1.0, 0.0], atol=1e-6)
    theirs = keras.optimizers.SGD(1.0, clipnorm=1.0)._clip_gradients([grad])[0]
    assert float(tf.norm(tf.convert_to_tensor(theirs))) > 1.4
    dense = [tf.constant([3.0, 4.0])]
    np.testing.assert_allclose(optimizers.Adam(clipnorm=1.0)._clip_gradients(dense)[0], [0.6, 0.8], atol=1e-6)
    np.testing.assert_allclose(optimizers.Adam()._clip_gradients(dense)[0], [3.0, 4.0])


def test_optimizers_round_trip_their_config():
    optimizer = optimizers.Adam(1e-3, beta_2=0.98, clipnorm=1.0)
    config = keras.optimizers.serialize(optimizer)
    again = keras.optimizers.deserialize(config)
    assert type(again) is optimizers.Adam and again.clipnorm == 1.0


def test_strategies_are_named_for_humans():
    kind = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    assert distribution.describe(tf.distribute.get_strategy()) == f"one {kind}"
    assert distribution.describe(tf.distribute.MirroredStrategy(["/cpu:0"])) == "MirroredStrategy over one CPU"
