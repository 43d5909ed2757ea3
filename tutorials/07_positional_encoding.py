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
# # 07 · Positional encoding: giving self-attention a sense of order
#
# An RNN knows the order of the words because it reads them one after the other.
# Self-attention reads them all at once, and, as we show first, it cannot tell one
# order from another. The Transformer fixes that by adding a position signal to the
# word vectors (Vaswani et al., 2017, section 3.5). Nothing is trained; both modes run
# in seconds.

# %% [markdown]
# **What you will learn**
#
# * that self-attention without positions cannot tell one word order from another;
# * the sinusoidal position encoding, checked against its formula;
# * why sines: moving $k$ positions is the same rotation at every position;
# * how `layers.PositionalEmbedding` combines token vectors, $\sqrt{d_\text{model}}$ scaling,
#   positions and the padding mask.
#
# **What you need**: tutorials 05 and 06, and a little trigonometry. Nothing is trained.

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import layers
from keras_attention.explain.plotting import plot_position_encoding

_common.start("07 Positional encoding")

# %% [markdown]
# ## Self-attention sees a set, not a sequence
#
# Shuffle the input vectors of an encoder block and its outputs come out shuffled
# the same way, each with exactly the value it had before: every position computes
# the same function of "itself" and "the set of all positions". So "dog bites man"
# and "man bites dog" would give each word the same vector. We check it on a
# `layers.TransformerEncoder` block.

# %%
encoder = layers.TransformerEncoder(num_heads=2, intermediate_dim=32)
words = keras.random.normal((1, 6, 16), seed=1).numpy()  # (batch, words, d_model): six "word vectors"
permutation = np.array([3, 0, 5, 1, 4, 2])
out = encoder(words).numpy()
out_shuffled = encoder(words[:, permutation]).numpy()
print("output:", out.shape)
print("max |encoder(shuffled) - shuffled(encoder)| =", np.abs(out_shuffled - out[:, permutation]).max())

# %% [markdown]
# ## The sinusoids
#
# The paper adds to the word vector at position $pos$ a vector of the same size
# $d_\text{model}$ whose features are
#
# $$PE_{(pos, 2i)} = \sin\!\left(pos / 10000^{2i/d_\text{model}}\right), \qquad
# PE_{(pos, 2i+1)} = \cos\!\left(pos / 10000^{2i/d_\text{model}}\right).$$
#
# Each pair of features $(2i, 2i+1)$ is a point turning around a circle as the
# position grows, at its own speed: the wavelengths form a geometric progression from
# $2\pi$ (the first pair changes a lot from one word to the next) to $10000 \cdot 2\pi$
# (the last pairs barely move over a sentence). Read across a row, the vector is a
# fingerprint of the position, fast digits to slow digits, like a clock.
# `layers.SinusoidalPositionEncoding` returns this table for the input's shape.

# %%
length, d_model = 64, 128
table = layers.SinusoidalPositionEncoding()(keras.ops.zeros((1, length, d_model)))
print("encoding:", tuple(table.shape), " (batch, positions, d_model)")

pos = np.arange(length)[:, None]
i = np.arange(d_model // 2)[None, :]
angles = pos / 10000 ** (2 * i / d_model)
formula = np.zeros((length, d_model))
formula[:, 0::2], formula[:, 1::2] = np.sin(angles), np.cos(angles)
print("max |formula - layer| =", np.abs(formula - table.numpy()[0]).max())

figure = plot_position_encoding(table[0], path=figure_path("07_position_encoding.png"))

# %% [markdown]
# In the heat map each row is a position and each column a feature. On the left the
# fast pairs alternate quickly down the rows; towards the right the columns change so
# slowly that they are almost constant over 64 positions. (Some implementations put all
# the sines in the first half and all the cosines in the second, which gives the
# "split down the middle" picture often shown; it is the same encoding with the
# features in another order.)
#
# ## Why sines: relative positions are linear
#
# For one frequency $\omega$, moving $k$ positions ahead rotates the pair
# $(\sin \omega p, \cos \omega p)$ by the angle $\omega k$, whatever $p$ is:
#
# $$\begin{pmatrix} \sin \omega(p+k) \\ \cos \omega(p+k) \end{pmatrix}
# = \begin{pmatrix} \cos \omega k & \sin \omega k \\ -\sin \omega k & \cos \omega k \end{pmatrix}
# \begin{pmatrix} \sin \omega p \\ \cos \omega p \end{pmatrix}.$$
#
# So $PE_{p+k} = M_k\, PE_p$ with one matrix $M_k$ for every $p$: "three words to the
# left" is a fixed linear map, something a query or key projection can learn to use.
# The paper chose the sinusoids on this hypothesis: that such offsets would be easy to learn.

# %%
k = 3
frequencies = 1.0 / 10000 ** (2 * np.arange(d_model // 2) / d_model)
M = np.zeros((d_model, d_model))
for j, w in enumerate(frequencies):
    c, s = np.cos(w * k), np.sin(w * k)
    M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = [[c, s], [-s, c]]
pe = table.numpy()[0]
errors = [np.abs(M @ pe[p] - pe[p + k]).max() for p in range(length - k)]
print(f"max |M_{k} PE_p - PE_(p+{k})| over all p: {max(errors):.2e}")

# %% [markdown]
# A consequence: the dot product of two encodings, $PE_p \cdot PE_q = \sum_i \cos(\omega_i(p-q))$,
# depends only on the distance $p - q$. Plotted for all pairs it is constant along
# every diagonal and highest on the main diagonal ($d_\text{model}/2$). Away from it the
# similarity drops, but not steadily: a sum of cosines of many frequencies rises and
# falls again, so two distant positions can look more alike than two closer ones.

# %%
similarity = pe @ pe.T  # (positions, positions)
print("similarity:", similarity.shape, " diagonal (= d_model / 2):", similarity[0, 0].round(3))
print("constant along diagonals:", np.allclose(np.diag(similarity, 5), similarity[0, 5], atol=1e-3))
fig, ax = plt.subplots(figsize=(4.5, 3.8))
image = ax.imshow(similarity, cmap="viridis")
ax.set_xlabel("position q")
ax.set_ylabel("position p")
ax.set_title("PE_p · PE_q")
fig.colorbar(image, ax=ax)
fig.tight_layout()
fig.savefig(figure_path("07_position_similarity.png"), dpi=100)

# %% [markdown]
# ## The Transformer's input layer
#
# `layers.PositionalEmbedding(vocab_size=..., d_model=...)` looks up the token vectors,
# multiplies them by $\sqrt{d_\text{model}}$ (section 3.4) and adds the encoding. With
# `mask_zero=True`, id 0 is padding and the layer passes a mask on to the attention
# layers. `position="learned"` trains a table of position vectors instead; the paper
# found nearly identical results with learned positions (table 3, row E) and kept the
# sinusoids because they may extend to sentences longer than any seen in training.

# %%
embedding = layers.PositionalEmbedding(vocab_size=100, d_model=16, mask_zero=True)
ids = keras.ops.convert_to_tensor([[12, 7, 42, 7, 0, 0]])  # token 7 twice, then padding
vectors = embedding(ids)
print("ids:", tuple(ids.shape), " -> vectors:", tuple(vectors.shape))
print("mask:", embedding.compute_mask(ids).numpy().tolist())
same_token = np.abs(vectors.numpy()[0, 1] - vectors.numpy()[0, 3]).max()
print(f"token 7 at positions 1 and 3 now differs by up to {same_token:.2f}")

# %% [markdown]
# Back to the first experiment: with positions added, shuffling the words changes
# what every word's output is, because each vector now says where it stands.

# %%
ids = keras.ops.convert_to_tensor([[12, 7, 42, 9, 31, 5]])
shuffled_ids = keras.ops.take(ids, permutation, axis=1)
out = encoder(embedding(ids)).numpy()
out_shuffled = encoder(embedding(shuffled_ids)).numpy()
print("with positions, max |encoder(shuffled) - shuffled(encoder)| =",
      np.abs(out_shuffled - out[:, permutation]).max().round(3))

# %% [markdown]
# ## Recap
#
# * Shuffling the inputs of an encoder block shuffles its outputs the same way: it sees a set.
# * Feature pair $i$ of the encoding turns around a circle at frequency
#   $\omega_i = 10000^{-2i/d_\text{model}}$, fast pairs first.
# * $PE_{p+k} = M_k PE_p$ with one rotation matrix $M_k$ for every $p$, and $PE_p \cdot PE_q$
#   depends only on $p - q$.
# * Adding positions to the scaled token vectors makes the same token differ by position, and
#   shuffling then changes the outputs.
#
# ## Exercises
#
# 1. Check the rotation for a move of two positions to the *left* ($k = -2$). *Hint:* rebuild
#    `M` with `k = -2` and compare `M @ pe[p]` with `pe[p - 2]` for `p >= 2`.
# 2. With $d_\text{model} = 128$, which feature pairs turn less than one full circle over the
#    64 positions of the table? *Hint:* pair $i$ turns once every $2\pi / \omega_i$ positions
#    (`2 * np.pi / frequencies` in the rotation cell); find where that passes 64.
# 3. Show that `PositionalEmbedding` scales the token vector by $\sqrt{d_\text{model}}$: for the
#    token at position 0, subtract $PE_0$ from the layer's output and compare with the token's
#    row of `embedding.token_embedding.embeddings`. *Hint:* call `embedding` on one token,
#    e.g. `[[12]]`; at position 0 each pair of $PE_0$ is $(\sin 0, \cos 0) = (0, 1)$.
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (sections 3.4 and 3.5)](https://arxiv.org/abs/1706.03762).
#
# ## Solutions
#
# <details><summary>1. Moving left</summary>
#
# The same code with `k = -2` and `errors = [np.abs(M @ pe[p] - pe[p - 2]).max() for p in range(2, length)]`
# gives an error at float32 rounding level: $M_{-k}$ is the rotation by $-\omega k$, the inverse
# (and transpose) of $M_k$.
# </details>
#
# <details><summary>2. Slow pairs</summary>
#
# Pair $i$ has wavelength $2\pi \cdot 10000^{2i/128}$ positions. It exceeds 64 when
# $10000^{i/64} > 64/(2\pi) \approx 10.19$, that is $i > 64 \log_{10}(10.19)/4 \approx 16.1$: pairs
# 17 to 63 (features 34 to 127) turn less than once, which is why the right of the heat map
# looks constant.
# </details>
#
# <details><summary>3. The scaling</summary>
#
# ```python
# ids = keras.ops.convert_to_tensor([[12]])
# vector = embedding(ids).numpy()[0, 0]
# pe_0 = np.tile([0.0, 1.0], 8)  # sin(0), cos(0) for each of the 8 pairs
# token = embedding.token_embedding.embeddings.numpy()[12]
# print(np.abs((vector - pe_0) - 4.0 * token).max())  # sqrt(16) = 4; ~0
# assert np.allclose(vector - pe_0, 4.0 * token, atol=1e-5)
# ```
# </details>
