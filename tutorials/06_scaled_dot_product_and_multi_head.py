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
# # 06 · Scaled dot-product attention and multi-head attention
#
# The Transformer's attention (Vaswani et al., 2017, section 3.2) is
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V,$$
#
# the lookup of tutorial 05 with a dot product as the score, computed for all
# queries at once as two matrix products, and divided by $\sqrt{d_k}$. This tutorial
# shows numerically why the division is there, then splits the attention into heads.
# Nothing is trained; both modes run in seconds.

# %% [markdown]
# **What you will learn**
#
# * why the dot products are divided by $\sqrt{d_k}$, from their variance;
# * what large logits do to the softmax and to its gradient (its Jacobian);
# * how `layers.scaled_dot_product_attention` applies masks;
# * how multi-head attention splits $d_\text{model}$ into heads, rebuilt head by head from a
#   layer's weights.
#
# **What you need**: tutorial 05. Nothing is trained.

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import layers
from keras_attention.explain.plotting import plot_attention_heads

_common.start("06 Scaled dot-product and multi-head attention")

# %% [markdown]
# ## Why divide by $\sqrt{d_k}$
#
# Take a query $q$ and a key $k$ whose $d_k$ entries are independent, with mean 0 and
# variance 1 (roughly what a freshly initialised, normalised network produces). Their
# dot product $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ independent
# terms of variance 1, so its variance is $d_k$ and its typical size $\sqrt{d_k}$
# (the paper's footnote 4). Dividing by $\sqrt{d_k}$ brings the variance back to 1 for
# any head size. Let us measure it.

# %%
rng = np.random.default_rng(0)
dims = [4, 16, 64, 256, 1024]
print(f"{'d_k':>5} {'var(q.k)':>10} {'var(q.k / sqrt(d_k))':>22}")
variances = []
for d_k in dims:
    q = rng.normal(size=(20000, d_k))
    k = rng.normal(size=(20000, d_k))
    dots = np.sum(q * k, axis=1)
    variances.append((dots.var(), (dots / np.sqrt(d_k)).var()))
    print(f"{d_k:5d} {variances[-1][0]:10.1f} {variances[-1][1]:22.3f}")

# %% [markdown]
# ## What large logits do to the softmax
#
# Now give one query 10 keys and look at the softmax of the 10 dot products. When
# the logits are spread over a range of tens, the largest one takes nearly all the
# weight: the softmax becomes a hard arg-max. Its Jacobian,
# $\partial p_i / \partial z_j = p_i(\delta_{ij} - p_j)$, then goes to zero, so the
# scores (and $W^Q$, $W^K$ behind them) stop receiving gradient. We average the
# largest weight, the entropy of the weights (log 10 = 2.30 would be uniform) and the
# size of the Jacobian over 2,000 random queries, with and without the scaling.

# %%
def softmax_stats(logits):
    z = logits - logits.max(-1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    entropy = -(p * np.log(p + 1e-30)).sum(-1)
    jacobian = p[:, :, None] * (np.eye(p.shape[-1]) - p[:, None, :])  # (n, keys, keys)
    return p.max(-1).mean(), entropy.mean(), np.linalg.norm(jacobian, axis=(1, 2)).mean()


stats = {"unscaled": [], "scaled": []}
print(f"{'d_k':>5} | {'max weight':>10} {'entropy':>8} {'|Jacobian|':>10} | "
      f"{'max weight':>10} {'entropy':>8} {'|Jacobian|':>10}")
print(f"{'':5} | {'unscaled':^30} | {'divided by sqrt(d_k)':^30}")
for d_k in dims:
    q = rng.normal(size=(2000, 1, d_k))
    k = rng.normal(size=(2000, 10, d_k))
    logits = np.einsum("nqd,nkd->nk", q, k)  # (queries, 10 keys)
    stats["unscaled"].append(softmax_stats(logits))
    stats["scaled"].append(softmax_stats(logits / np.sqrt(d_k)))
    u, s = stats["unscaled"][-1], stats["scaled"][-1]
    print(f"{d_k:5d} | {u[0]:10.3f} {u[1]:8.3f} {u[2]:10.4f} | {s[0]:10.3f} {s[1]:8.3f} {s[2]:10.4f}")

fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
axes[0].loglog(dims, [v[0] for v in variances], "o-", label="q·k")
axes[0].loglog(dims, [v[1] for v in variances], "o-", label="q·k / √d_k")
axes[0].set_title("variance of the logits")
for i, (ax, title) in enumerate(zip(axes[1:], ("largest softmax weight", "size of the softmax Jacobian"))):
    column = 0 if i == 0 else 2
    ax.semilogx(dims, [s[column] for s in stats["unscaled"]], "o-", label="unscaled")
    ax.semilogx(dims, [s[column] for s in stats["scaled"]], "o-", label="÷ √d_k")
    ax.set_title(title)
for ax in axes:
    ax.set_xlabel("d_k")
    ax.legend()
fig.tight_layout()
fig.savefig(figure_path("06_scaling.png"), dpi=100)
for d_k in (64, 1024):
    u, s = stats["unscaled"][dims.index(d_k)], stats["scaled"][dims.index(d_k)]
    print(f"d_k = {d_k:4d} without scaling: largest weight {u[0]:.2f} (scaled: {s[0]:.2f}), "
          f"Jacobian {s[2] / u[2]:.1f} times smaller than with scaling")

# %% [markdown]
# The last two lines sum it up: without the scaling, already at $d_k = 64$ (the paper's
# head size) the largest of ten weights dominates and the Jacobian shrinks, and at
# $d_k = 1024$ the softmax is practically one-hot. With the scaling, none of the three
# depends on $d_k$. The paper suspects this is why
# additive attention beat unscaled dot-product attention for large $d_k$ in earlier
# work: scaling keeps the speed of plain matrix products without that cost.
#
# ## The library's function
#
# `layers.scaled_dot_product_attention(q, k, v, mask=None)` computes exactly the
# formula, here checked against NumPy. A boolean `mask` (True = may attend) gives
# masked keys a weight of exactly zero.

# %%
q = keras.random.normal((2, 3, 16), seed=1)  # (batch, queries, d_k)
k = keras.random.normal((2, 5, 16), seed=2)  # (batch, keys, d_k)
v = keras.random.normal((2, 5, 8), seed=3)  # (batch, keys, d_v)
mask = np.array([[[True] * 5] * 3, [[True] * 3 + [False] * 2] * 3])  # second example: 3 real keys
output, weights = layers.scaled_dot_product_attention(q, k, v, mask=mask)
print("output:", tuple(output.shape), " weights:", tuple(weights.shape))

logits = np.einsum("bqd,bkd->bqk", q.numpy(), k.numpy()) / np.sqrt(16)
logits = np.where(mask, logits, -np.inf)
p = np.exp(logits - logits.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
print("max |numpy - library| weights:", np.abs(p - weights.numpy()).max(),
      " output:", np.abs(p @ v.numpy() - output.numpy()).max())
print("weights on masked keys:", weights.numpy()[1, :, 3:].ravel())

# %% [markdown]
# ## Multi-head attention (section 3.2.2)
#
# One softmax gives one weighted average per query: a word can take a mixture of the
# others, but only one mixture. Multi-head attention runs $h$ attentions side by
# side, each on its own learned projections into a smaller space of
# $d_k = d_\text{model} / h$ dimensions, and concatenates the results:
#
# $$\operatorname{head}_i = \operatorname{Attention}(QW_i^Q, KW_i^K, VW_i^V),\qquad
# \operatorname{MultiHead}(Q, K, V) = [\operatorname{head}_1; \dots; \operatorname{head}_h]\,W^O.$$
#
# Since each head is $h$ times narrower, all of them together cost about as much as
# one full-width head. The base model has $d_\text{model} = 512$ and $h = 8$ heads of
# $d_k = d_v = 64$.
#
# `layers.MultiHeadAttention(num_heads, key_dim)` stores $W^Q$, $W^K$, $W^V$ as kernels
# of shape `(d_model, heads, key_dim)` and $W^O$ as `(heads, key_dim, d_model)`. We
# rebuild its output head by head with `scaled_dot_product_attention`, printing the
# shape at each step.

# %%
d_model, heads = 32, 4
attention = layers.MultiHeadAttention(num_heads=heads, key_dim=d_model // heads)
x = keras.random.normal((1, 7, d_model), seed=4)  # (batch, words, d_model)
output, weights = attention(x, x, return_attention_scores=True)
print("layer output:", tuple(output.shape), " weights:", tuple(weights.shape), " (batch, heads, queries, keys)")

Q = keras.ops.einsum("btd,dnh->btnh", x, attention.query_dense.kernel) + attention.query_dense.bias
K = keras.ops.einsum("btd,dnh->btnh", x, attention.key_dense.kernel) + attention.key_dense.bias
V = keras.ops.einsum("btd,dnh->btnh", x, attention.value_dense.kernel) + attention.value_dense.bias
print("Q, K, V per head:", tuple(Q.shape), " (batch, words, heads, key_dim)")
per_head, head_weights = layers.scaled_dot_product_attention(Q, K, V)  # rank 4: all heads at once
print("heads' outputs:", tuple(per_head.shape), " weights:", tuple(head_weights.shape))
concatenated = keras.ops.reshape(per_head, (1, 7, heads * (d_model // heads)))
print("concatenated:", tuple(concatenated.shape))
by_heads = keras.ops.matmul(concatenated, keras.ops.reshape(attention.output_dense.kernel, (d_model, d_model)))
by_heads = by_heads + attention.output_dense.bias
print("max |by heads - layer| =", float(keras.ops.max(keras.ops.abs(by_heads - output))))

# %% [markdown]
# Each head has its own map. The weights here are untrained, so the patterns are
# arbitrary, but they already differ from head to head because each head projects
# into its own subspace. Tutorial 10 draws the heads of a trained Transformer.

# %%
tokens = [f"w{i}" for i in range(7)]
plot_attention_heads(weights[0], tokens, tokens, path=figure_path("06_heads.png"), columns=4)
print("rows sum to one in every head:", np.allclose(weights.numpy().sum(-1), 1.0, atol=1e-5))

# %% [markdown]
# ## Recap
#
# * With entries of variance 1, $q \cdot k$ has variance $d_k$; dividing by $\sqrt{d_k}$
#   brings it back to 1 for any head size.
# * Unscaled, large heads make the softmax nearly one-hot and its Jacobian small, so the
#   scores learn slowly.
# * A mask (True = may attend) gives masked keys a weight of exactly zero.
# * $h$ heads of size $d_\text{model}/h$ cost about as much as one full-width head, and each
#   gets its own attention map.
#
# ## Exercises
#
# 1. Repeat the variance table with query and key entries of variance 2 (multiply both by
#    $\sqrt 2$). What is the variance of $q \cdot k / \sqrt{d_k}$ now, and what divisor would
#    bring it back to 1? *Hint:* multiply `q` and `k` by `np.sqrt(2)` in the variance cell;
#    for independent entries of mean 0, the variance of $q_i k_i$ is the product of theirs.
# 2. Zero the query kernel of head 0 of the multi-head layer and call it again. What do head
#    0's weights become, and do the other heads change? *Hint:*
#    `kernel = attention.query_dense.kernel.numpy(); kernel[:, 0] = 0`, then `assign` it.
# 3. Count the parameters of `layers.MultiHeadAttention(num_heads=h, key_dim=32 // h)` on
#    inputs of width 32 for $h$ = 1, 4 and 8. Why do they not depend on $h$? *Hint:* call
#    each layer on `x` first; a query kernel of shape `(32, h, 32 // h)` holds how many numbers?
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (sections 3.2.1 and 3.2.2)](https://arxiv.org/abs/1706.03762).
#
# ## Solutions
#
# <details><summary>1. Entries of variance 2</summary>
#
# Each product $q_i k_i$ now has variance $2 \cdot 2 = 4$, so $q \cdot k / \sqrt{d_k}$ has
# variance 4. Dividing by $2\sqrt{d_k}$ (the square root of $\operatorname{Var}(q_i)\operatorname{Var}(k_i) d_k$)
# brings it back to 1. Layer normalisation before the projections keeps real inputs near
# variance 1, which is what the $\sqrt{d_k}$ of the paper assumes.
# </details>
#
# <details><summary>2. A head with no query</summary>
#
# ```python
# _, before = attention(x, x, return_attention_scores=True)
# kernel = attention.query_dense.kernel.numpy()
# kernel[:, 0] = 0
# attention.query_dense.kernel.assign(kernel)
# _, weights = attention(x, x, return_attention_scores=True)
# print(weights.numpy()[0, 0].round(3))  # 1/7 everywhere
# assert np.allclose(weights.numpy()[0, 0], 1 / 7, atol=1e-3)
# assert np.allclose(weights.numpy()[0, 1:], before.numpy()[0, 1:], atol=1e-6)  # the other heads
# ```
# Head 0's queries are now its bias, which starts at zero, so every score is 0 and every
# weight $1/7$. The other heads have their own kernels and do not change.
# </details>
#
# <details><summary>3. Parameters and heads</summary>
#
# ```python
# for h in (1, 4, 8):
#     layer = layers.MultiHeadAttention(num_heads=h, key_dim=32 // h)
#     layer(x, x)
#     print(h, layer.count_params())  # 4 * (32 * 32 + 32) = 4,224 each time
#     assert layer.count_params() == 4 * (32 * 32 + 32)
# ```
# The four projections map 32 features to $h \times 32/h = 32$ features whatever $h$ is; the
# heads only decide how those features are grouped for the softmax.
# </details>
