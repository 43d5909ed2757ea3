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
# # 08 · The encoder block: self-attention, feed-forward, residuals, layer norm
#
# The Transformer's encoder is a stack of $N$ identical blocks ($N = 6$ in the paper,
# section 3.1). Each block has two sub-layers, multi-head self-attention and a small
# feed-forward network, and wraps each in the same way:
#
# $$x \leftarrow \operatorname{LayerNorm}(x + \operatorname{Dropout}(\operatorname{Sublayer}(x))).$$
#
# This tutorial takes `layers.TransformerEncoder` apart and checks each piece. Nothing
# is trained; both modes run in seconds.

# %% [markdown]
# **What you will learn**
#
# * the encoder block's two sub-layers and how each is wrapped (residual, dropout, layer norm);
# * how to rebuild a block's output from its own sub-layers;
# * what "position-wise" means for the feed-forward network;
# * post-norm against pre-norm, seen in the size of the residual stream;
# * why padding does not leak into the real positions, and how many parameters a block has.
#
# **What you need**: tutorials 06 and 07. Nothing is trained.

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import layers
from keras_attention.explain.plotting import plot_attention_heads

_common.start("08 The encoder block")

# %% [markdown]
# ## One block, in shapes
#
# A batch of two "sentences" of 10 positions and $d_\text{model} = 32$; the second has
# only 6 real tokens and 4 of padding. The block keeps the shape: that is what lets
# blocks stack and residuals add up.

# %%
d_model = 32
block = layers.TransformerEncoder(num_heads=4, intermediate_dim=4 * d_model)
x = keras.random.normal((2, 10, d_model), seed=1)
padding_mask = np.array([[True] * 10, [True] * 6 + [False] * 4])
y, scores = block(x, padding_mask=padding_mask, return_attention_scores=True)
print("input:", tuple(x.shape), " output:", tuple(y.shape), " self-attention:", tuple(scores.shape),
      " (batch, heads, queries, keys)")
print("weight on padded keys (second sentence):", float(keras.ops.max(scores[1, :, :, 6:])))
tokens = [f"t{i}" for i in range(6)] + ["[PAD]"] * 4
figure = plot_attention_heads(scores[1], tokens, tokens, path=figure_path("08_encoder_heads.png"))

# %% [markdown]
# ## The two sub-layers, by hand
#
# With dropout off, the block is exactly the formula above applied twice. We rebuild
# its output from its own sub-layers: `self_attention`, `self_attention_norm`,
# `feedforward_intermediate`, `feedforward_output` and `feedforward_norm`.

# %%
a = block.self_attention(x, x, value_mask=padding_mask)  # (batch, positions, d_model)
h = block.self_attention_norm(x + a)  # residual, then layer norm
f = block.feedforward_output(block.feedforward_intermediate(h))  # d_model -> d_ff -> d_model
by_hand = block.feedforward_norm(h + f)
print("attention:", tuple(a.shape), " hidden of the feed-forward:",
      tuple(block.feedforward_intermediate(h).shape), " output:", tuple(by_hand.shape))
print("max |by hand - block| =", float(keras.ops.max(keras.ops.abs(by_hand - y))))

# %% [markdown]
# ## The feed-forward network is position-wise
#
# $\operatorname{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$ is applied to every position
# separately with the same weights: the attention mixes information *across*
# positions, the feed-forward network transforms each position *on its own*. (It is
# the same as two convolutions of width 1.) In the paper $d_\text{ff} = 2048$, four
# times $d_\text{model}$. One position alone gives the same result as inside the
# sequence:

# %%
ffn = lambda v: block.feedforward_output(block.feedforward_intermediate(v))
alone = ffn(h[:, 3:4])  # position 3 only: (batch, 1, d_model)
print("max |FFN(position 3 alone) - FFN(sequence)[3]| =",
      float(keras.ops.max(keras.ops.abs(alone[:, 0] - ffn(h)[:, 3]))))

# %% [markdown]
# ## Layer normalisation
#
# Layer norm rescales each position's vector to mean 0 and variance 1 across its
# $d_\text{model}$ features, then applies a learned gain and bias (initially 1 and 0).
# Unlike batch norm it uses no statistics of the other examples, so it behaves the same
# for any batch size and is not disturbed by padding. In the paper's post-norm block
# it comes last, so every block's output is normalised:

# %%
out = y.numpy()
print("per-position mean of the output: max |mean| =", np.abs(out.mean(-1)).max().round(4))
print("per-position std of the output:  ", out.std(-1).min().round(3), "to", out.std(-1).max().round(3))

# %% [markdown]
# ## Residual connections
#
# Each sub-layer only adds a correction to its input, $x + \operatorname{Sublayer}(x)$.
# The identity path lets the input (and, going backwards, the gradient) cross a deep
# stack undisturbed; it is also why every sub-layer must output $d_\text{model}$
# features.
#
# Where the layer norm sits matters in deep stacks. The paper normalises after the sum
# (*post-norm*). Most later models normalise the sub-layer's input instead,
# $x + \operatorname{Sublayer}(\operatorname{LayerNorm}(x))$ (*pre-norm*,
# `normalize_first=True`): the residual path is then a pure sum from the first block
# to the last, which trains more stably without a warm-up (Xiong et al., 2020), and
# the stack ends with one more layer norm (`Transformer(normalize_first=True)` adds
# it). Below, the size of each position's vector after each of six blocks of both kinds.

# %%
def stack_norms(normalize_first, depth=6):
    keras.utils.set_random_seed(0)
    h = keras.random.normal((4, 10, d_model), seed=2)
    norms = [float(keras.ops.mean(keras.ops.norm(h, axis=-1)))]
    for _ in range(depth):
        h = layers.TransformerEncoder(num_heads=4, intermediate_dim=4 * d_model, normalize_first=normalize_first)(h)
        norms.append(float(keras.ops.mean(keras.ops.norm(h, axis=-1))))
    return norms


post, pre = stack_norms(False), stack_norms(True)
print("mean vector norm after each block, post-norm:", np.round(post, 2))
print("mean vector norm after each block, pre-norm: ", np.round(pre, 2))
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(post, "o-", label="post-norm (paper)")
ax.plot(pre, "o-", label="pre-norm")
ax.axhline(np.sqrt(d_model), color="gray", lw=0.8, ls="--", label="√d_model")
ax.set_xlabel("blocks applied")
ax.set_ylabel("mean ‖x‖ per position")
ax.legend()
fig.tight_layout()
fig.savefig(figure_path("08_residual_stream.png"), dpi=100)

# %% [markdown]
# Post-norm resets every vector to length $\sqrt{d_\text{model}}$ after each block;
# pre-norm lets the residual stream grow as blocks add their corrections.
#
# ## Padding does not leak
#
# Padded positions are masked as keys, so they receive no attention, and the
# feed-forward network and layer norm work position by position. The real positions'
# outputs therefore do not depend on how much padding follows them:

# %%
sentence = x[1:2, :6]  # the six real positions of the second example
padded = keras.ops.concatenate([sentence, keras.ops.zeros((1, 8, d_model))], axis=1)
short = block(sentence)
long = block(padded, padding_mask=np.array([[True] * 6 + [False] * 8]))
print("shapes:", tuple(short.shape), tuple(long.shape))
print("max |no padding - 8 padded positions| on the real tokens:",
      float(keras.ops.max(keras.ops.abs(short - long[:, :6]))))

# %% [markdown]
# ## Size of a block
#
# Per block: four $d_\text{model} \times d_\text{model}$ projections with biases for
# attention, $W_1$ and $W_2$ with biases for the feed-forward network, and two layer
# norms of $2 d_\text{model}$ parameters each. For the paper's base model that is:

# %%
d, d_ff = 512, 2048
base_block = layers.TransformerEncoder(num_heads=8, intermediate_dim=d_ff)
base_block.build((None, None, d))
formula = 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 2 * (2 * d)
print(f"parameters: layer {base_block.count_params():,}, formula {formula:,}; "
      f"six blocks: {6 * formula / 1e6:.1f} M")

# %% [markdown]
# The heat map saved above shows the four heads of the second sentence: the padded
# columns are empty in every head. Tutorial 09 builds the decoder block, which adds a
# causal mask and a second attention over the encoder's output.

# %% [markdown]
# ## Recap
#
# * A post-norm block computes $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$ twice:
#   self-attention, then the feed-forward network.
# * The feed-forward network transforms each position on its own; only attention mixes
#   positions.
# * Layer norm gives each position mean 0 and variance 1 over its features (before its gain
#   and bias).
# * Pre-norm (`normalize_first=True`) leaves the residual path a plain sum, so the stream grows
#   from block to block; post-norm resets it after each one.
# * Masked keys get no weight, so the real positions' outputs do not depend on padding.
#
# ## Exercises
#
# 1. Rebuild a *pre-norm* block by hand:
#    $y = x + \operatorname{Attn}(\operatorname{LN}_1(x))$, then
#    $y + \operatorname{FFN}(\operatorname{LN}_2(y))$. *Hint:*
#    `layers.TransformerEncoder(num_heads=4, intermediate_dim=4 * d_model, normalize_first=True)`; the
#    sub-layers have the same names as in the post-norm block.
# 2. Work out the parameters of one block of the library's `small` preset
#    ($d_\text{model} = 256$, $d_\text{ff} = 1024$) with the formula, then check it with a layer.
#    *Hint:* the "Size of a block" cell with `d, d_ff = 256, 1024` (any number of heads that
#    divides 256 gives the same count).
# 3. Make a block with `dropout=0.1` and call it twice on the same input with `training=True`,
#    then twice with `training=False`. Which pairs of outputs are equal? *Hint:*
#    `layers.TransformerEncoder(num_heads=4, intermediate_dim=4 * d_model, dropout=0.1)`, then
#    compare each pair with `keras.ops.max(keras.ops.abs(...))`.
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (sections 3.1 and 3.3)](https://arxiv.org/abs/1706.03762).
# * Ba, Kiros and Hinton (2016). [Layer Normalization](https://arxiv.org/abs/1607.06450).
# * He et al. (2016). [Deep Residual Learning for Image Recognition](https://arxiv.org/abs/1512.03385).
# * Xiong et al. (2020). [On Layer Normalization in the Transformer Architecture](https://arxiv.org/abs/2002.04745).
#
# ## Solutions
#
# <details><summary>1. Pre-norm by hand</summary>
#
# ```python
# pre = layers.TransformerEncoder(num_heads=4, intermediate_dim=4 * d_model, normalize_first=True)
# y_pre = pre(x, padding_mask=padding_mask)
# a = pre.self_attention(pre.self_attention_norm(x), pre.self_attention_norm(x), value_mask=padding_mask)
# h = x + a
# by_hand = h + pre.feedforward_output(pre.feedforward_intermediate(pre.feedforward_norm(h)))
# print(float(keras.ops.max(keras.ops.abs(by_hand - y_pre))))  # ~1e-6
# assert np.allclose(by_hand, y_pre, atol=1e-5)
# ```
# </details>
#
# <details><summary>2. The small preset's block</summary>
#
# $4(256^2 + 256) + (256 \cdot 1024 + 1024) + (1024 \cdot 256 + 256) + 2 \cdot 2 \cdot 256 = 789{,}760$.
#
# ```python
# small = layers.TransformerEncoder(num_heads=4, intermediate_dim=1024)
# small.build((None, None, 256))
# print(small.count_params())  # 789760
# assert small.count_params() == 789_760
# ```
# </details>
#
# <details><summary>3. Dropout</summary>
#
# With `training=True` each call draws new dropout masks, so the two outputs differ; with
# `training=False` dropout is off and the two outputs are equal. `model.fit` calls the layers
# with `training=True`, `predict` and the decoders with `training=False`.
# </details>
