# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · Several GPUs and several hosts
#
# The paper trained its base model on 8 GPUs for 12 hours (section 5.2). This
# tutorial shows how the library's models train on several devices with
# `tf.distribute`, and checks the one property that matters: **two replicas compute
# the same training as one device** on the same global batches.
#
# No GPU is needed to see it. TensorFlow can split the CPU into several *logical*
# devices, which a `MirroredStrategy` then treats like GPUs. That must happen before
# TensorFlow sets up its devices, so it is the very first thing we do. (Logical CPU
# devices share the same cores, so they show correctness, not speed.)

# %% [markdown]
# **What you will learn**
#
# * data parallelism: replicas, the global batch, the all-reduce of gradients;
# * how to see it without a GPU, with logical CPU devices;
# * why the loss is divided by the *global* token count and gradients are clipped after the
#   sum, so that two replicas train like one device;
# * how several hosts join one training job with `TF_CONFIG`.
#
# **What you need**: tutorial 10 (the Transformer and its training). No GPU.

# %%
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import json

import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import QUICK, SETTINGS, figure_path
from keras_attention import data
from keras_attention.training import Adam, MaskedSparseCrossEntropy, MaskedTokenAccuracy, get_strategy

_common.start("11 Several GPUs and several hosts")
print("logical CPU devices:", [d.name for d in tf.config.list_logical_devices("CPU")])

# %% [markdown]
# ## Data parallelism
#
# `MirroredStrategy` keeps one copy of every weight on each device (a *replica*). Each
# training step:
#
# 1. splits the **global batch** into one slice per replica;
# 2. every replica runs the forward and backward pass on its slice;
# 3. the gradients are summed across replicas (an *all-reduce*);
# 4. every replica applies the same summed gradient, so the copies stay identical.
#
# `training.get_strategy("mirrored")` returns a `MirroredStrategy` over all
# GPUs, or over the logical CPU devices when there is none. The model, its optimizer
# and its metrics must be created, and `compile` called, inside `strategy.scope()`;
# `fit` is called as usual, with the global batch size.

# %%
strategy = get_strategy("mirrored")
print(type(strategy).__name__, "with", strategy.num_replicas_in_sync, "replicas:",
      strategy.extended.worker_devices)

# %% [markdown]
# ## One device against two replicas
#
# We train the same Transformer twice from the same initial weights on the same
# batches (not shuffled, so both runs see them in the same order): once on one device
# and once on two replicas. Dropout is off so that both runs compute the same
# function. Two details of the library make the two runs agree:
#
# * **The loss is the mean over the real tokens of the whole global batch.** Keras
#   computes the loss on each replica and adds the replicas' gradients.
#   `MaskedSparseCrossEntropy` divides each replica's summed token losses by the token
#   count of the *global* batch, so the sum over replicas is exactly the one-device loss,
#   however the padding falls between the slices.
# * **Gradient clipping acts on the summed gradient.** A Keras optimizer with `clipnorm`
#   clips each replica's share before the shares are added, which is not what one
#   device does. `training.Adam` clips the sum.

# %%
translation_data = _common.load_translation_data()
steps = 8 if QUICK else 60  # at most
batches = data.make_translation_dataset(
    translation_data.train_pairs, translation_data.source_tokenizer, translation_data.target_tokenizer,
    batch_size=SETTINGS.batch_size, max_length=SETTINGS.max_length, drop_remainder=True,
).take(steps)  # full batches only, so that every step splits evenly between the replicas
steps = sum(1 for _ in batches)
(source_ids, target_in), target_out = next(iter(batches))
print(f"{steps} steps, global batch {SETTINGS.batch_size}: each replica gets "
      f"{SETTINGS.batch_size // strategy.num_replicas_in_sync} sentences; first batch {tuple(source_ids.shape)}")


def train_on(strategy, initial_weights=None):
    """Build, compile and fit a dropout-free Transformer under `strategy`; return the
    loss of every step, the initial and the final weights."""
    with strategy.scope():
        model = _common.build_translation_model("transformer", translation_data, dropout=0.0)
        model((source_ids[:1], target_in[:1]))  # create the weights
        if initial_weights is not None:
            model.set_weights(initial_weights)
        start_weights = model.get_weights()
        model.compile(
            optimizer=Adam(1e-3, beta_2=0.98, epsilon=1e-9, clipnorm=1.0),
            loss=MaskedSparseCrossEntropy(label_smoothing=0.1),
            metrics=[MaskedTokenAccuracy()],
            jit_compile=False,  # XLA cannot compile a step that spans several devices
        )
    running = []  # after each batch Keras logs the mean loss of the epoch so far
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: running.append(logs["loss"]))
    model.fit(batches, epochs=1, verbose=0, callbacks=[record])
    k = np.arange(1, len(running) + 1)
    totals = np.array(running, "float64") * k  # sum of the losses of steps 1..k
    per_step = np.diff(totals, prepend=0.0)
    return per_step, start_weights, model.get_weights(), [w.path for w in model.weights]


one_device = tf.distribute.get_strategy()  # the default strategy: no distribution
loss_one, start, final_one, names = train_on(one_device)
loss_two, _, final_two, _ = train_on(strategy, initial_weights=start)
print("loss of the last step, one device:", round(float(loss_one[-1]), 5),
      " two replicas:", round(float(loss_two[-1]), 5))
print("largest difference of a step's loss:", float(np.abs(loss_one - loss_two).max()))
relative = {  # per weight tensor: |difference| / |how far training moved it|
    name: np.linalg.norm(a - b) / max(np.linalg.norm(a - s0), 1e-12)
    for name, a, b, s0 in zip(names, final_one, final_two, start)
}
total = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(final_one, final_two)))
moved = np.sqrt(sum(np.sum((a - s0) ** 2) for a, s0 in zip(final_one, start)))
print(f"all weights: the runs differ by {total / moved:.1e} of the distance training moved them")
for name in sorted(relative, key=relative.get, reverse=True)[:3]:
    print(f"  most different: {name} ({relative[name]:.1e})")
print(f"  median over the {len(relative)} weight tensors: {np.median(list(relative.values())):.1e}")

fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
axes[0].plot(np.arange(1, steps + 1), loss_one, "o-", label="one device")
axes[0].plot(np.arange(1, steps + 1), loss_two, "x--", label="two replicas")
axes[0].set_ylabel("training loss of the step")
axes[0].legend()
axes[1].semilogy(np.arange(1, steps + 1), np.abs(loss_one - loss_two) + 1e-12, "o-")
axes[1].set_ylabel("|one device - two replicas|")
for ax in axes:
    ax.set_xlabel("step")
fig.tight_layout()
fig.savefig(figure_path("11_loss_per_step.png"), dpi=100)

# %% [markdown]
# The two runs agree up to the rounding of float32 sums done in a different order
# (each replica adds up half the batch, then the halves are added): the "largest
# difference" line gives the largest gap between the two runs' losses at any step, to
# read against losses of about the size printed on the line above it. The weights drift
# apart slowly as those rounding differences compound from step to step; the lines above
# give the drift relative to how far training moved the weights, for all of them and for
# the median tensor, so a longer run shows a larger figure. When the tensors that differ
# most are the attention layers' *key biases*, that is a property of attention, not of the
# distribution: adding the
# same vector $b$ to every key adds the same number $q \cdot b$ to all the scores of a
# query, which the softmax ignores, so their true gradient is zero. What they receive
# is rounding noise, and Adam, which divides each gradient by its own running scale,
# turns even noise into steps the size of the learning rate. On real GPUs the
# step takes about as long as one GPU's step on its slice plus the all-reduce, so
# with N GPUs an epoch takes roughly 1/N of the time, as long as each slice is large
# enough to keep its GPU busy.
#
# Keep the global batch and the learning rate of the one-device recipe and the
# training is the same. If you grow the global batch with the number of GPUs, there
# are fewer steps per epoch, and the learning rate or the warm-up usually needs
# adjusting.
#
# ## Several hosts
#
# `MultiWorkerMirroredStrategy` extends the same scheme across machines: every GPU of
# every host is a replica, and the all-reduce goes over the network. Each host runs the
# **same program**, and learns its place in the cluster from the `TF_CONFIG`
# environment variable: the list of workers (`host:port`) and which one it is. Worker 0
# is the chief and writes the outputs. For two hosts:

# %%
cluster = {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]}
for index in range(2):
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
    print(f"on {cluster['worker'][index].split(':')[0]}: export TF_CONFIG='{json.dumps(tf_config)}'")
print("then, on both: keras-attention train --strategy multi_worker --dataset multi30k --batch-size 256 ...")

# %% [markdown]
# The strategy has to be created before TensorFlow runs anything else (the command
# line does that first; in a script, call `get_strategy("multi_worker")` at the top),
# every worker reads the same data with the same seed, and the batch size is the global
# batch over all replicas of all hosts. Under this strategy, call
# `training.adapt_to_multi_worker(model, batch)` after `compile` (the training recipe
# does). `docs/distributed.md` covers the details: the
# evaluator process, resuming a killed run, mixed precision, and what to expect.

# %% [markdown]
# ## Recap
#
# * `MirroredStrategy` keeps a copy of the weights per device and adds the replicas'
#   gradients every step.
# * Build and compile inside `strategy.scope()`; call `fit` with the global batch.
# * Two replicas and one device agree up to the rounding of sums taken in another order.
# * `MultiWorkerMirroredStrategy` runs the same program on every host; `TF_CONFIG` tells each
#   one the cluster and its own index.
#
# ## Exercises
#
# 1. Work out, for a replica A with 10 real tokens and a summed loss of 20, and a replica B with
#    30 tokens and a summed loss of 30, the one-device loss, the mean of the replicas' own
#    means, and what the library's division gives. *Hint:* a mean over tokens is a summed loss
#    divided by a token count; the three answers differ in which sums meet which counts.
# 2. Write the `TF_CONFIG` of worker 1 in a cluster of three hosts, `10.0.0.1:2222`,
#    `10.0.0.2:2222` and `10.0.0.3:2222`. *Hint:* start from `tf_config` in the two-host cell;
#    `index` counts from 0 and picks this host out of the `cluster` list.
# 3. Split the CPU into three logical devices instead of two (first code cell) and run the
#    comparison again. What should stay true, and why? *Hint:* TensorFlow sets its devices up
#    once, so restart the kernel (or run the script anew) after the edit. The global batch no
#    longer splits evenly between three replicas; which token count does each replica divide
#    its loss by?
#
# ## Papers
#
# * Goyal et al. (2017). [Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour](https://arxiv.org/abs/1706.02677).
# * Vaswani et al. (2017). [Attention Is All You Need (section 5.2, training on 8 GPUs)](https://arxiv.org/abs/1706.03762).
#
# ## Solutions
#
# <details><summary>1. Which mean</summary>
#
# One device: $(20 + 30)/(10 + 30) = 1.25$. Mean of the replicas' means: $(2 + 1)/2 = 1.5$, which
# weights A's few tokens as much as B's many. The library divides each replica's sum by the
# global count: $20/40 + 30/40 = 1.25$, the one-device value.
# </details>
#
# <details><summary>2. TF_CONFIG</summary>
#
# ```python
# import json
# worker_1 = {
#     "cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222"]},
#     "task": {"type": "worker", "index": 1},
# }
# print(f"export TF_CONFIG='{json.dumps(worker_1)}'")  # on 10.0.0.2, before starting the job
# ```
# The same cluster list on every host; only `index` differs. It goes into the environment of
# the process on that host: set here, it would tell this notebook's later runs that they are
# worker 1 of a cluster that does not exist.
# </details>
#
# <details><summary>3. Three replicas</summary>
#
# The losses of the two runs should again agree up to rounding: each global batch is now split
# into three slices, and since every replica divides by the global token count, the sum over
# replicas is still the one-device loss however the slices fall.
# </details>
