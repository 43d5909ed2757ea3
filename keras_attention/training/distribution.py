"""Choosing a `tf.distribute` strategy, and the precision and XLA switches."""

import json
import os

import keras
import tensorflow as tf

from keras_attention.base.tensorflow_only import require_tensorflow
from keras_attention.base.options import PRECISIONS, STRATEGIES
from keras_attention.base.validation import check_choice


def get_strategy(name="auto"):
    """A distribution strategy by name.

    - `"auto"`: `MirroredStrategy` over all GPUs when there are two or more,
      else the default (single-device) strategy.
    - `"default"`: one device.
    - `"mirrored"`: `MirroredStrategy` over all GPUs, or over all logical CPU
      devices when there is no GPU (useful for tests).
    - `"multi_worker"`: `MultiWorkerMirroredStrategy`, configured from the
      `TF_CONFIG` environment variable (which must be set). Ask for it at the
      start of the program: TensorFlow refuses once it has run anything.

    The batch size given to `fit` and to the data pipeline stays the global
    batch; each of the N replicas computes on 1/N of it.

    Args:
        name: one of `STRATEGIES`. Defaults to "auto".

    Returns:
        A `tf.distribute.Strategy`.
    """
    require_tensorflow("Distributed training (`tf.distribute`)")
    check_choice("strategy", name, STRATEGIES)
    if name == "multi_worker":  # before anything lists devices: that starts TensorFlow's runtime
        return _multi_worker_strategy()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        return tf.distribute.MirroredStrategy() if len(gpus) >= 2 else tf.distribute.get_strategy()
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)


def _multi_worker_strategy():
    config = os.environ.get("TF_CONFIG")
    if not config:
        raise ValueError(
            "strategy='multi_worker' needs the TF_CONFIG environment variable "
            "(cluster addresses and this worker's task). Received: TF_CONFIG unset"
        )
    try:
        json.loads(config)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}). Received: TF_CONFIG={config!r}") from None
    return tf.distribute.MultiWorkerMirroredStrategy()


def set_precision(policy="float32"):
    """Set Keras' global dtype policy: "float32", "mixed_float16" or "mixed_bfloat16".

    Under "mixed_float16" Keras wraps optimizers in a `LossScaleOptimizer`
    when the model is compiled, so small gradients do not underflow.
    """
    check_choice("precision", policy, PRECISIONS)
    keras.config.set_dtype_policy(policy)
    return policy


def is_chief(strategy):
    """True unless `strategy` is multi-worker and this process is not its chief.

    The chief is the task of type "chief", or worker 0 when the cluster has no
    "chief" task. Only the chief should write shared outputs.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def num_workers(strategy):
    """The number of worker processes (chief included) of `strategy`'s cluster; 1 without one."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return 1
    cluster = resolver.cluster_spec().as_dict()
    return max(1, len(cluster.get("worker", [])) + len(cluster.get("chief", [])))


def describe(strategy):
    """The strategy in words.

    For example "one CPU", "MirroredStrategy over 4 GPUs" or "MultiWorkerMirroredStrategy, worker 0 of 2".
    """
    devices = _device_words(strategy)
    if getattr(strategy, "cluster_resolver", None) is not None:
        resolver = strategy.cluster_resolver
        return (f"MultiWorkerMirroredStrategy, {resolver.task_type or 'worker'} {resolver.task_id or 0} of "
                f"{num_workers(strategy)} workers, {devices} each")
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        return f"MirroredStrategy over {devices}"
    return devices


def _device_words(strategy):
    """"one CPU", "2 GPUs", ... for the devices this process's replicas run on."""
    try:
        names = list(strategy.extended.worker_devices)
    except (AttributeError, RuntimeError):  # the default strategy: the first GPU if there is one
        names = []
    default = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    kinds = sorted({tf.DeviceSpec.from_string(name).device_type or default for name in names}) or [default]
    kind = "/".join(kinds)
    count = max(1, len(names))
    return f"one {kind}" if count == 1 else f"{count} {kind}s"


def task_name(strategy):
    """"chief", or e.g. "worker-1" for another task of a multi-worker cluster."""
    if is_chief(strategy):
        return "chief"
    resolver = strategy.cluster_resolver
    return f"{resolver.task_type}-{resolver.task_id}"


def xla_supported(strategy):
    """Whether Keras can compile the train step with XLA under `strategy`.

    Keras 3 wraps the whole `strategy.run` in one XLA function, which cannot
    reach variables on several devices (keras-team/keras#19005; Keras itself
    turns XLA off under `tf.distribute` when `jit_compile="auto"`). So XLA
    is for one replica only.
    """
    return strategy.num_replicas_in_sync == 1 and getattr(strategy, "cluster_resolver", None) is None


def adapt_to_multi_worker(model, batch):
    """Let `model.fit` and `evaluate` run under `MultiWorkerMirroredStrategy` (Keras 3).

    Keras 3's TensorFlow trainer (3.15 included) fails under this strategy in
    two places (keras-team/keras#20585, tensorflow/tensorflow#72388): before
    the first step it averages the first batch over workers with one
    `strategy.reduce` of a nested structure, which the strategy rejects; and
    after each step it reduces every scalar log with `axis=0`. For this model
    instance only, this builds the compiled loss, metrics and optimizer on a
    local `batch` instead, skips that first reduce, and makes the train and
    test steps return their logs with shape (1,), which Keras then averages
    over the replicas. Epoch-end logs come from the metrics themselves and
    are exact. Call it in the strategy's scope, after `compile`.

    Args:
        model: a compiled `keras.Model` created under the strategy.
        batch: one `(x, y)` batch of the training data, as plain tensors.

    Returns:
        `model`, adapted.

    Example:

    >>> strategy = get_strategy("multi_worker")  # doctest: +SKIP
    >>> with strategy.scope():  # doctest: +SKIP
    ...     model = build_model("transformer", "small", 8000, 8000)
    ...     model.compile(optimizer=Adam(1e-3), loss=MaskedSparseCrossEntropy())
    ...     adapt_to_multi_worker(model, next(iter(train_ds)))
    >>> model.fit(train_ds, epochs=10)  # doctest: +SKIP
    """
    model._symbolic_build(data_batch=batch)
    model._maybe_symbolic_build = _built_already
    model.train_step = _logs_as_vectors(model.train_step)
    model.test_step = _logs_as_vectors(model.test_step)
    return model


def _built_already(iterator=None, data_batch=None):
    return None


def _logs_as_vectors(step):
    def step_with_vector_logs(data):
        logs = step(data)
        return {name: tf.reshape(value, (1,)) if value.shape.rank == 0 else value
                for name, value in logs.items()}

    return step_with_vector_logs


def worker_index(strategy):
    """This process's index among `num_workers(strategy)` workers: the chief is 0, then the workers."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    if resolver.task_type == "chief":
        return 0
    return resolver.task_id + (1 if has_chief else 0)
