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
# # 05 · Attention as lookup: queries, keys, values, and self-attention
#
# Bahdanau's and Luong's layers look like special machinery for RNN translation.
# Stripped down, they are a *soft dictionary lookup*, and that reading (made explicit
# in "Attention Is All You Need", section 3.2) is what leads to the Transformer. This
# tutorial trains nothing; it runs in seconds in both modes.

# %% [markdown]
# **What you will learn**
#
# * attention as a soft dictionary lookup: a query, keys, values and a softmax;
# * what the scale before the softmax does, from a blend to a nearly hard lookup;
# * why keys and values can be different vectors;
# * inter-attention against self-attention, and the learned projections $Q = XW^Q$,
#   $K = XW^K$, $V = XW^V$ of a real layer;
# * why the Transformer chose self-attention over recurrence: the paper's table 1, and
#   one layer of each timed on your device.
#
# **What you need**: tutorials 01 and 02 (recurrent layers, the Bahdanau comparison) and NumPy.
# Nothing is trained.

# %%
import os

import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import QUICK, figure_path
from keras_attention import layers
from keras_attention.explain.plotting import plot_attention

_common.start("05 Queries, keys and values")

# %% [markdown]
# ## A dictionary with soft keys
#
# A Python `dict` returns the value whose key equals the query, or nothing. An
# attention layer compares the query with *every* key, turns the similarities into
# weights with a softmax, and returns the weighted average of the values:
#
# $$\text{output} = \sum_j \operatorname{softmax}_j(\text{score}(q, k_j))\, v_j .$$
#
# If one key matches much better than the others the output is (almost) that key's
# value: an ordinary lookup. If several match, it blends their values. Because every
# step is smooth, the query, keys and values can all be learned by gradient descent.
#
# Below, five keys are random unit vectors; each value records two facts about the
# thing the key stands for. The query is the key of "dog" plus some noise. The
# `scale` argument of `scaled_dot_product_attention` multiplies the dot products
# before the softmax: the larger it is, the sharper the lookup.

# %%
names = ["cat", "dog", "bird", "car", "bike"]
values = np.array([[4, 0], [4, 0], [2, 0], [0, 4], [0, 2]], "float32")  # (legs, wheels)
rng = np.random.default_rng(0)
keys = rng.normal(size=(5, 16)).astype("float32")
keys /= np.linalg.norm(keys, axis=1, keepdims=True)
query = keys[1] + 0.15 * rng.normal(size=16).astype("float32")  # near "dog"

sharpness = (0.5, 2.0, 8.0)
lookups = []
for scale in sharpness:
    output, weights = layers.scaled_dot_product_attention(
        query[None, None, :], keys[None], values[None], scale=scale
    )  # shapes (batch, queries, d): one query here
    lookups.append(weights.numpy()[0, 0])
    print(f"scale {scale:4}: weights {np.round(weights.numpy()[0, 0], 2)} -> "
          f"(legs, wheels) = {np.round(output.numpy()[0, 0], 2)}")
print("query:", query[None, None, :].shape, " keys:", keys[None].shape, " values:", values[None].shape,
      " output:", tuple(output.shape))

fig, ax = plt.subplots(figsize=(6, 3))
for i, (scale, w) in enumerate(zip(sharpness, lookups)):
    ax.bar(np.arange(5) + (i - 1) * 0.27, w, 0.27, label=f"scale {scale}")
ax.set_xticks(range(5), names)
ax.set_ylabel("weight on the key")
ax.set_title('A query near "dog": soft to nearly hard lookup')
ax.legend()
fig.tight_layout()
fig.savefig(figure_path("05_soft_lookup.png"), dpi=100)

# %% [markdown]
# ## Bahdanau attention in these terms
#
# In tutorial 02 the **query** was the decoder state $s_{i-1}$, the **keys** were the
# encoder annotations $h_j$ (compared through the alignment network) and the
# **values** were the same $h_j$ (averaged into the context). Keys and values do not
# have to be the same vectors: a key says "when should I be read", a value says "what
# you get when you read me". The library's `BahdanauAttention` and `LuongAttention`
# accept a separate `key=` argument for that reason.
#
# ## Inter-attention and intra-attention (self-attention)
#
# When queries come from one sequence and keys and values from another, as in the
# decoder reading the encoder, this is called *inter*-attention (or encoder-decoder
# attention, or cross-attention). When all three come from the *same* sequence it is
# *intra*-attention, or **self-attention**: every word gathers information from the
# other words of its own sentence. Cheng, Dong and Lapata (2016) used it inside an
# LSTM, attending to the words read so far; Vaswani et al. (2017) built a whole model
# from it, dropping the recurrence.
#
# To see both without training anything, describe each word by its letter
# trigrams (a bag of `"<ma"`, `"man"`, `"an>"`, ...) and use these vectors directly as
# queries, keys and values. The similarity of two words is then simply how much of
# their spelling they share.

# %%
english = "A man in a blue shirt plays football in the park".split()
german = "Ein Mann in einem blauen Hemd spielt Fußball im Park".split()


def trigrams(word):
    word = f"<{word.lower()}>"
    return {word[i : i + 3] for i in range(len(word) - 2)}


vocabulary = sorted(set().union(*(trigrams(w) for w in english + german)))


def spell_vectors(words):
    x = np.array([[t in trigrams(w) for t in vocabulary] for w in words], "float32")
    return x / np.linalg.norm(x, axis=1, keepdims=True)  # (words, trigrams), unit length


x_en, x_de = spell_vectors(english)[None], spell_vectors(german)[None]  # add a batch axis
print("English vectors:", x_en.shape, " German vectors:", x_de.shape, " (batch, words, trigram features)")

# Inter-attention: English words query the German sentence.
cross_output, cross_weights = layers.scaled_dot_product_attention(x_en, x_de, x_de, scale=8.0)
print("inter-attention weights:", tuple(cross_weights.shape), " (batch, English words, German words)")
plot_attention(cross_weights[0], german, english, path=figure_path("05_inter_attention.png"),
               title="English queries, German keys (shared spelling)")

# Self-attention: the English sentence queries itself.
self_output, self_weights = layers.scaled_dot_product_attention(x_en, x_en, x_en, scale=8.0)
print("self-attention weights: ", tuple(self_weights.shape), " (batch, words, words)")
plot_attention(self_weights[0], english, english, path=figure_path("05_self_attention.png"),
               title="Self-attention with spelling vectors")
for word, row in zip(english, cross_weights.numpy()[0]):
    found = f"{german[row.argmax()]} (weight {row.max():.2f})" if row.max() > 0.2 else "nothing: uniform weights"
    print(f"{word:9s} -> {found}")

# %% [markdown]
# Cognates find each other (man/Mann, park/Park, football/Fußball), and so do
# identical words ("in"). Words with no shared spelling (shirt/Hemd) spread their
# weight over everything. In self-attention each word mostly finds itself, plus the
# other copies of "a" and "in".
#
# That is the limit of fixed vectors. In a real model the queries, keys and values
# are *learned projections* of the word vectors, $Q = XW^Q$, $K = XW^K$, $V = XW^V$,
# so the model can learn that "shirt" should look for "Hemd", or that a verb should
# look for its subject rather than for itself. A single-head
# `layers.MultiHeadAttention` is exactly that; below we recompute its output by hand
# from its weights (`query_dense.kernel` has shape `(d_model, heads, key_dim)`).

# %%
attention = layers.MultiHeadAttention(num_heads=1, key_dim=8)
x = keras.ops.convert_to_tensor(x_en)
output, weights = attention(x, x, return_attention_scores=True)
print("input:", tuple(x.shape), " output:", tuple(output.shape), " weights:", tuple(weights.shape),
      " (batch, heads, queries, keys)")


def project(kernel, bias):
    return x_en[0] @ kernel.numpy()[:, 0, :] + bias.numpy()[0]  # (words, key_dim)


q = project(attention.query_dense.kernel, attention.query_dense.bias)
k = project(attention.key_dense.kernel, attention.key_dense.bias)
v = project(attention.value_dense.kernel, attention.value_dense.bias)
scores = q @ k.T / np.sqrt(8)
a = np.exp(scores - scores.max(-1, keepdims=True))
a /= a.sum(-1, keepdims=True)
by_hand = a @ v @ attention.output_dense.kernel.numpy()[0] + attention.output_dense.bias.numpy()
print("Q, K, V:", q.shape, k.shape, v.shape)
print("max |by hand - layer| =", np.abs(by_hand - output.numpy()[0]).max())

# %% [markdown]
# The projections here are random, so the map means nothing yet; training is what
# turns them into useful questions. Two details of the formula, the division by
# $\sqrt{d_k}$ and the several heads, are the subject of tutorial 06.

# %% [markdown]
# ## Why self-attention (section 4 of the paper)
#
# A recurrent layer also lets every word gather information from the others, one step
# at a time. Vaswani et al. compare the two (and convolutions) on three counts, in their
# table 1, for a sentence of $n$ words with vectors of $d$ features:
#
# * the **operations per layer**: self-attention compares every pair of positions,
#   $n^2$ dot products of length $d$; a recurrent layer multiplies each of $n$ states by
#   $d \times d$ matrices;
# * the **sequential operations**: a recurrent layer cannot compute position $t$ before
#   $t - 1$; self-attention computes all positions at once;
# * the **maximum path length** between two positions, through which the signal linking
#   them (and its gradient) must pass: $n$ steps in a recurrence, one in self-attention.

# %%
import time

import tensorflow as tf

TABLE_1 = [  # layer: operations per layer, sequential operations, maximum path length
    ("self-attention", "O(n^2 d)", "O(1)", "O(1)"),
    ("recurrent", "O(n d^2)", "O(n)", "O(n)"),
    ("convolutional, kernel k", "O(k n d^2)", "O(1)", "O(log_k n)"),
    ("self-attention within r neighbours", "O(r n d)", "O(1)", "O(n / r)"),
]
print(f"{'layer':36s} {'per layer':>11s} {'sequential':>11s} {'path':>11s}")
for name, per_layer, sequential, path in TABLE_1:
    print(f"{name:36s} {per_layer:>11s} {sequential:>11s} {path:>11s}")

# %% [markdown]
# Counting multiply-adds for one layer of width $d$ (a GRU has three gates, each with an
# input and a recurrent $d \times d$ matrix; self-attention has four $d \times d$
# projections, then the $n \times n$ scores and the weighted sum), the two cost the same
# at $n = d$: self-attention does less arithmetic for sentences shorter than their vectors
# are wide, which is the usual case in translation. Arithmetic is not time, though. Below,
# one GRU layer and one self-attention layer of width 256, on a batch of 16 sequences,
# timed at several lengths (median of 5 calls after a warm-up).

# %%
d_model, batch = 256, 16
lengths = [16, 64, 256] if QUICK else [16, 32, 64, 128, 256, 512]
device = "a GPU" if tf.config.list_physical_devices("GPU") else f"a CPU with {os.cpu_count()} cores"


def median_ms(model, x, rounds=5):
    model.predict_on_batch(x)  # traces the function for this length, and warms up
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        model.predict_on_batch(x)
        seconds.append(time.perf_counter() - started)
    return 1000 * float(np.median(seconds))


def multiply_adds(n):
    gru = 3 * 2 * n * d_model**2  # three gates, input and recurrent matrices, each position
    attention = 4 * n * d_model**2 + 2 * n**2 * d_model  # projections, then scores and weighted sum
    return gru, attention


inputs = keras.Input((None, d_model))
recurrent = keras.Model(inputs, keras.layers.GRU(d_model, return_sequences=True)(inputs))
self_attention = keras.Model(inputs, layers.MultiHeadAttention(num_heads=4, key_dim=d_model // 4)(inputs, inputs))
print(f"timed on {device}, batch {batch}, d = {d_model}")
print(f"{'n':>5} {'GRU (ms)':>9} {'self-attention (ms)':>20} {'time ratio':>11} {'operations ratio':>17}")
timings = []
for n in lengths:
    x = keras.random.normal((batch, n, d_model), seed=n)  # (batch, n, d)
    gru_ms, attention_ms = median_ms(recurrent, x), median_ms(self_attention, x)
    gru_ops, attention_ops = multiply_adds(n)
    timings.append((n, gru_ms, attention_ms))
    print(f"{n:5d} {gru_ms:9.2f} {attention_ms:20.2f} {gru_ms / attention_ms:11.1f} {gru_ops / attention_ops:17.2f}")
slower = [n for n, g, a in timings if a > g]
print("self-attention slower than the GRU at n =", slower if slower else "none of these lengths")

fig, ax = plt.subplots(figsize=(5.5, 3.4))
ax.loglog([t[0] for t in timings], [t[1] for t in timings], "o-", label="GRU (recurrent)")
ax.loglog([t[0] for t in timings], [t[2] for t in timings], "o-", label="self-attention, 4 heads")
ax.set_xticks(lengths, [str(n) for n in lengths])
ax.minorticks_off()
ax.set_xlabel("sequence length n")
ax.set_ylabel("ms per call (median)")
ax.set_title(f"one layer, d = {d_model}, batch {batch}, on {device}", fontsize=9)
ax.legend()
fig.tight_layout()
fig.savefig(figure_path("05_why_self_attention.png"), dpi=100)

# %% [markdown]
# The "operations ratio" column is the arithmetic of the GRU over that of self-attention:
# above 1 below $n = 256$, below 1 above it. The "time ratio" column is what the device
# made of it, and two things pull in opposite directions. The GRU's $n$ steps run one
# after another, each a small product of a `(16, 256)` state with `(256, 768)` matrices,
# which leaves a processor (and a GPU far more) underused; self-attention runs all
# positions in a few large products, but its $n^2$ term outgrows the GRU's work once $n$
# passes $d$. The last printed line says at which of these lengths, if any, the GRU was
# faster on this device.
#
# Speed is only part of the argument. The path length matters for learning: in a
# recurrence, the gradient that links the first word to the thirtieth passes through 29
# applications of the cell (tutorial 01); in self-attention, through one attention layer.
# For very long inputs the $n^2$ term wins in the end, which is why the paper mentions
# restricting attention to a neighbourhood of $r$ positions (the last row of the table).

# %% [markdown]
# ## Recap
#
# * Output = $\sum_j \operatorname{softmax}_j(\text{score}(q, k_j))\, v_j$: a weighted average of the
#   values, weighted by how well each key matches the query.
# * A larger scale sharpens the softmax: one good match then returns (almost) its value alone.
# * Inter-attention takes queries from one sequence and keys and values from another;
#   self-attention takes all three from the same sequence.
# * A single-head `MultiHeadAttention` is exactly this lookup on learned projections (checked
#   by hand against its weights).
# * Self-attention costs $O(n^2 d)$ operations per layer against a recurrence's $O(n d^2)$,
#   computes all positions at once, and links any two positions in one step.
#
# ## Exercises
#
# 1. Put the query halfway between "cat" and "car": `(keys[0] + keys[3]) / 2`. What does the
#    lookup return at scale 8? *Hint:* each $q \cdot k_j$ is now the average of "cat"'s and
#    "car"'s dot products with $k_j$; call `layers.scaled_dot_product_attention` as the
#    soft-lookup cell does (rerunning that cell would set its own query again).
# 2. Use one-hot values, `np.eye(5, dtype="float32")`, with the soft-lookup cell's query. What
#    is the output then? *Hint:* compare the output with the weights.
# 3. In the spelling self-attention each word mostly finds itself. Why is that guaranteed
#    for these vectors? *Hint:* `spell_vectors` scales every vector to length 1; how large
#    can the dot product of two unit vectors be, and when does it reach that?
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (section 3.2)](https://arxiv.org/abs/1706.03762).
# * Cho et al. (2014). [On the Properties of Neural Machine Translation: Encoder-Decoder Approaches](https://arxiv.org/abs/1409.1259) (the GRU).
# * Cheng, Dong and Lapata (2016). [Long Short-Term Memory-Networks for Machine Reading](https://arxiv.org/abs/1601.06733).
# * Bahdanau, Cho and Bengio (2014). [Neural Machine Translation by Jointly Learning to Align and Translate](https://arxiv.org/abs/1409.0473).
#
# ## Solutions
#
# <details><summary>1. A query between two keys</summary>
#
# ```python
# between = (keys[0] + keys[3]) / 2
# output, weights = layers.scaled_dot_product_attention(between[None, None], keys[None], values[None], scale=8.0)
# print(dict(zip(names, np.round(weights.numpy()[0, 0], 2))), "->", np.round(output.numpy()[0, 0], 2))
# ```
# "cat" and "car" get the same weight, because the query's dot product with each is
# $(1 + \text{cat} \cdot \text{car}) / 2$; the other keys get little. The output is close to
# (2, 2): a blend of four legs and four wheels, not a lookup of either.
# </details>
#
# <details><summary>2. One-hot values</summary>
#
# ```python
# one_hot = np.eye(5, dtype="float32")
# output, weights = layers.scaled_dot_product_attention(query[None, None], keys[None], one_hot[None], scale=8.0)
# print(np.round(output.numpy()[0, 0], 3), np.round(weights.numpy()[0, 0], 3))
# ```
# The output is the weight vector itself: $\sum_j w_j e_j = w$.
# </details>
#
# <details><summary>3. Each word finds itself</summary>
#
# The vectors have length 1, so by the Cauchy-Schwarz inequality no dot product exceeds a
# vector's dot product with itself, which is 1. Only a word with the same spelling (the
# other "a", the other "in") scores as high.
# </details>
