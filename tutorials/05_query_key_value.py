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
#   $K = XW^K$, $V = XW^V$ of a real layer.
#
# **What you need**: tutorial 02 (for the Bahdanau comparison) and NumPy. Nothing is trained.

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import layers
from keras_attention.plotting import plot_attention

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
# ## Recap
#
# * Output = $\sum_j \operatorname{softmax}_j(\text{score}(q, k_j))\, v_j$: a weighted average of the
#   values, weighted by how well each key matches the query.
# * A larger scale sharpens the softmax: one good match then returns (almost) its value alone.
# * Inter-attention takes queries from one sequence and keys and values from another;
#   self-attention takes all three from the same sequence.
# * A single-head `MultiHeadAttention` is exactly this lookup on learned projections (checked
#   by hand against its weights).
#
# ## Exercises
#
# 1. Put the query halfway between "cat" and "car": `query = (keys[0] + keys[3]) / 2`. What
#    does the lookup return at scale 8?
# 2. Use one-hot values, `values = np.eye(5, dtype="float32")`. What is the output then?
# 3. In the spelling self-attention each word mostly finds itself. Why is that guaranteed
#    for these vectors?
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (section 3.2)](https://arxiv.org/abs/1706.03762).
# * Cheng, Dong and Lapata (2016). [Long Short-Term Memory-Networks for Machine Reading](https://arxiv.org/abs/1601.06733).
# * Bahdanau, Cho and Bengio (2014). [Neural Machine Translation by Jointly Learning to Align and Translate](https://arxiv.org/abs/1409.0473).
#
# ## Solutions
#
# <details><summary>1. A query between two keys</summary>
#
# "cat" and "car" get the same weight, because the query's dot product with each is
# $(1 + \text{cat} \cdot \text{car}) / 2$; the other keys get little. The output is close to
# (2, 2): a blend of four legs and four wheels, not a lookup of either.
# </details>
#
# <details><summary>2. One-hot values</summary>
#
# The output is the weight vector itself: $\sum_j w_j e_j = w$.
# </details>
#
# <details><summary>3. Each word finds itself</summary>
#
# The vectors have length 1, so by the Cauchy-Schwarz inequality no dot product exceeds a
# vector's dot product with itself, which is 1. Only a word with the same spelling (the
# other "a", the other "in") scores as high.
# </details>
