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
# # 09 · The decoder: causal masks, teacher forcing, cross-attention
#
# A decoder block (Vaswani et al., 2017, section 3.1) has three sub-layers, each with
# its residual connection and layer norm:
#
# 1. **masked** multi-head self-attention over the target words written so far;
# 2. multi-head **cross-attention**: queries from the decoder, keys and values from
#    the encoder's output (the "encoder-decoder attention" of section 3.2.3);
# 3. the position-wise feed-forward network.
#
# On top of the last block, a linear layer and a softmax give the distribution of the
# next word. We check the three ideas that make this work with `layers.TransformerDecoder`
# and `models.Transformer`. Nothing is trained; the first code cell prints the mode.

# %% [markdown]
# **What you will learn**
#
# * the causal mask, and the test that proves it: future tokens never change past outputs;
# * teacher forcing, the batches it needs and why it lets a Transformer train all positions
#   at once;
# * decoding one position at a time with a key/value cache, and why it gives the same numbers;
# * cross-attention, where the decoder reads the encoder.
#
# **What you need**: tutorial 08. Nothing is trained.

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import Translator, layers, models
from keras_attention.explain import explain
from keras_attention.explain.plotting import plot_attention_heads

_common.start("09 The decoder")

# %% [markdown]
# ## The causal mask
#
# A translation is written left to right: when the decoder predicts word $t$, words
# $t, t+1, \dots$ do not exist yet. Yet in training we feed the whole target sentence
# at once. The self-attention must therefore be forbidden from looking ahead: query
# $i$ may only use keys $j \le i$. The mask is lower-triangular; the scores above the
# diagonal are set to $-\infty$ before the softmax, so their weights are exactly zero.
# `MultiHeadAttention(..., use_causal_mask=True)` applies it.

# %%
x = keras.random.normal((1, 6, 16), seed=1)  # (batch, target positions, d_model)
attention = layers.MultiHeadAttention(num_heads=2, key_dim=8)
_, weights = attention(x, x, use_causal_mask=True, return_attention_scores=True)
w = weights.numpy()[0, 0]  # first head: (queries, keys)
print("weights:", tuple(weights.shape), " (batch, heads, queries, keys)")
print("largest weight above the diagonal:", np.triu(w, k=1).max())
print("rows sum to one:", np.allclose(w.sum(-1), 1.0))

fig, axes = plt.subplots(1, 2, figsize=(8, 3.5))
axes[0].imshow(np.tril(np.ones((6, 6))), cmap="Greys", vmin=0, vmax=1.3)
axes[0].set_title("causal mask (dark: may attend)")
image = axes[1].imshow(w, cmap="viridis", vmin=0)
axes[1].set_title("masked self-attention weights")
for ax in axes:
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
fig.colorbar(image, ax=axes[1])
fig.tight_layout()
fig.savefig(figure_path("09_causal_mask.png"), dpi=100)

# %% [markdown]
# `causal=True` is a shorthand for exactly this mask: the function builds the
# lower triangle itself and ANDs it with any mask passed in. The two calls below,
# on 256 positions, give the same numbers.

# %%

q, k, v = (keras.random.normal((2, 256, 2, 8), seed=s) for s in (2, 3, 4))  # (B, T, heads, d)
shorthand, _ = layers.scaled_dot_product_attention(q, k, v, causal=True)
explicit, _ = layers.scaled_dot_product_attention(q, k, v, mask=layers.causal_mask(256, 256))
print("largest difference, causal=True vs explicit mask:", float(np.abs(shorthand.numpy() - explicit.numpy()).max()))

# %% [markdown]
# ## Future tokens never change past outputs
#
# The test of a correct mask: change a target word at position 5 and look at the
# decoder's outputs. Positions 0 to 4 must not move at all; positions 5 and later may.
# We run a `PositionalEmbedding` and a `TransformerDecoder` block over a random
# "encoder output".

# %%
embedding = layers.PositionalEmbedding(vocab_size=50, d_model=32, mask_zero=True)
decoder = layers.TransformerDecoder(num_heads=4, intermediate_dim=64)
encoder_output = keras.random.normal((1, 7, 32), seed=2)  # (batch, source positions, d_model)
target = np.array([[2, 14, 7, 33, 21, 9, 40, 3]])  # [START] ... [END]
changed = target.copy()
changed[0, 5] = 17
out = decoder(embedding(target), encoder_output).numpy()
out_changed = decoder(embedding(changed), encoder_output).numpy()
difference = np.abs(out - out_changed).max(-1)[0]  # per position
print("decoder output:", out.shape, " (batch, target positions, d_model)")
for position, d in enumerate(difference):
    print(f"position {position}: max change {d:.2e}")
assert difference[:5].max() == 0.0, "a past position moved: the decoder read a future token"

fig, ax = plt.subplots(figsize=(5.5, 3))
ax.bar(range(8), difference, color=["tab:gray"] * 5 + ["tab:red"] * 3)
ax.axvline(4.5, color="black", lw=0.8, ls="--")
ax.set_xlabel("target position")
ax.set_ylabel("max |change| of the output")
ax.set_title("changing the token at position 5")
fig.tight_layout()
fig.savefig(figure_path("09_future_tokens.png"), dpi=100)

# %% [markdown]
# The same holds for a whole model: the logits of a `models.Transformer` at positions
# before the change are identical.

# %%
transformer = models.Transformer(50, 50, num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0.0)
source = np.array([[2, 5, 6, 7, 8, 3]])
logits = transformer((source, target)).numpy()
logits_changed = transformer((source, changed)).numpy()
per_position = np.abs(logits - logits_changed).max(-1)[0]
print("logits:", logits.shape, " (batch, target positions, vocabulary)")
print("max change before position 5:", per_position[:5].max(), "  from position 5 on:", per_position[5:].min().round(3))

# %% [markdown]
# ## Teacher forcing
#
# Because of the mask, one forward pass over the reference translation computes the
# predictions for *every* position in parallel, each as if the decoder had written the
# reference words before it. That is teacher forcing: the decoder input is
# `[START] y_1 ... y_n`, the expected output `y_1 ... y_n [END]`, and the loss sums the
# cross-entropy of all positions. An RNN decoder also trains this way, but still has
# to run its steps one after another; the Transformer's decoder does all positions in
# one go, which is much of why it trains faster.
#
# The batches `make_translation_dataset` makes for Multi30k:

# %%
translation_data = _common.load_translation_data()
(source_ids, target_in), target_out = next(iter(translation_data.train_batches))
tokens = translation_data.target_tokenizer.vocabulary
print("source_ids:", tuple(source_ids.shape), " target_in:", tuple(target_in.shape),
      " target_out:", tuple(target_out.shape))
n = int(np.sum(target_out[0].numpy() != 0))
print("decoder input: ", [tokens[i] for i in target_in[0, :n].numpy()])
print("expected:      ", [tokens[i] for i in target_out[0, :n].numpy()])

# %% [markdown]
# At translation time there is no reference: the decoder must feed back its own
# predictions, one word at a time. (The gap between the two regimes, training only on
# perfect prefixes, is known as *exposure bias*.) Running the full decoder again for
# every new word would redo all the previous positions; instead the decoder blocks
# keep a **cache** of the keys and values of the positions already seen, and each step
# computes only the new position. Thanks to the causal mask this gives exactly the
# numbers of the parallel pass. Each block's cache is a pair, keys and values, each
# of shape (batch, heads, positions, key_dim).
# Below, a small Transformer over the real batch:
# all positions at once, then step by step with `decode_step`.

# %%
model = models.Transformer(
    translation_data.source_tokenizer.vocab_size, translation_data.target_tokenizer.vocab_size,
    num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0.0,
)
src, tgt = source_ids[:2], target_in[:2]
parallel = model((src, tgt)).numpy()  # (batch, T, vocabulary): teacher forcing, one pass

state = model.init_decoding_state(src, max_length=tgt.shape[1])
steps = []
for t in range(tgt.shape[1]):
    step_logits, state, _ = model.decode_step(state, tgt[:, t], t)  # one new position
    steps.append(step_logits.numpy())
stepwise = np.stack(steps, axis=1)
print("parallel:", parallel.shape, " step by step:", stepwise.shape,
      " self-attention cache of block 0: keys", tuple(state["self_cache"][0][0].shape),
      "values", tuple(state["self_cache"][0][1].shape))
real = (tgt.numpy() != 0)
print("max |parallel - step by step| on real positions:", np.abs(parallel - stepwise)[real].max())

# %% [markdown]
# ## Cross-attention
#
# The second sub-layer is where the decoder reads the source. Its queries come from
# the decoder's positions, its keys and values from the encoder's output, so its weights
# have shape (target positions, source positions), like the Bahdanau alignments of
# tutorial 02, but with several heads, and every decoder block has its own. Padded
# source positions get zero weight. The three uses of attention in the Transformer
# are then: self-attention in the encoder (all positions see all), masked
# self-attention in the decoder (each position sees the earlier ones), and
# cross-attention from decoder to encoder (section 3.2.3).

# %%
encoder_output, source_mask = model.encode(src)
block = model.decoder_blocks[-1]
target_vectors = model.target_embedding(tgt)
_, cross = block(target_vectors, encoder_output, encoder_padding_mask=source_mask, return_attention_scores=True)
print("encoder output:", tuple(encoder_output.shape), " cross-attention:", tuple(cross.shape),
      " (batch, heads, target positions, source positions)")
s_len = int(np.sum(source_mask.numpy()[0]))
print("weight on padded source positions:", float(keras.ops.max(cross[0, :, :, s_len:])) if s_len < src.shape[1] else "no padding")
source_tokens = [translation_data.source_tokenizer.vocabulary[i] for i in src[0, :s_len].numpy()]
t_len = int(np.sum(real[0]))
target_tokens = [tokens[i] for i in tgt[0, :t_len].numpy()]
figure = plot_attention_heads(cross[0].numpy()[:, :t_len, :s_len], source_tokens, target_tokens,
                              path=figure_path("09_cross_attention.png"))

# %% [markdown]
# The model is untrained, so these maps are nearly flat; after training (tutorial 10)
# some heads align target words with their source words.
#
# All three kinds of attention, for every block and head, fit on one interactive page.
# `explain` needs a `Translator` (tokenizers around the model); it translates the
# sentence (here, an untrained model's output) and collects each weight the decoder
# used. Switch between encoder self-, decoder self- and cross-attention, pick a block
# and a head, and hover a word.

# %%
untrained = Translator(model, translation_data.source_tokenizer, translation_data.target_tokenizer,
                       max_target_length=12)
explain(untrained, [translation_data.test_pairs[0][0]])

# %% [markdown]
# Tutorial 10 trains the whole
# Transformer on Multi30k and compares it with the RNN models.

# %% [markdown]
# ## Recap
#
# * Query $i$ may only attend to keys $j \le i$; masked scores get weight exactly zero.
# * Changing the token at position 5 leaves positions 0 to 4 untouched, in one block and in a
#   whole model.
# * Training feeds `[START] y` and predicts `y [END]` for all positions in one pass.
# * At translation time the cache keeps each block's keys and values, so a step computes only
#   the new position, with the same results as the parallel pass.
# * Cross-attention maps have shape (target positions, source positions), one per head and
#   block.
#
# ## Exercises
#
# 1. Call the multi-head layer of the first cell *without* `use_causal_mask=True`, change the
#    input vector at position 3, and see which outputs move. *Hint:* edit a copy made with
#    `x.numpy().copy()`, then compare the outputs position by position, as the next section does.
# 2. Write a greedy decoding loop for the untrained `model` with `init_decoding_state` and
#    `decode_step`: start from `[START]`, feed back the arg-max for 10 steps. *Hint:* the cache
#    cell's loop, with the last arg-max in place of `tgt[:, t]` (first the tokenizer's `start_id`).
# 3. How many numbers does one block's self-attention cache hold for a batch of $B$ sentences
#    of $T$ positions, in terms of $d_\text{model}$? *Hint:* the cache cell prints block 0's keys
#    and values, each (batch, heads, positions, key_dim); what is heads × key_dim?
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (sections 3.1 and 3.2.3)](https://arxiv.org/abs/1706.03762).
#
# ## Solutions
#
# <details><summary>1. No mask</summary>
#
# ```python
# x_changed = x.numpy().copy()
# x_changed[0, 3] += 1.0
# before = attention(x, x)
# after = attention(x_changed, x_changed)
# moved = np.abs(before.numpy() - after.numpy()).max(-1)[0]
# print(moved)
# assert (moved > 0).all()  # every position moves
# ```
# Without the mask every query reads position 3, so positions 0 to 2 change too; with
# `use_causal_mask=True` they would not.
# </details>
#
# <details><summary>2. Greedy decoding by hand</summary>
#
# ```python
# start = translation_data.target_tokenizer.start_id
# state = model.init_decoding_state(src, max_length=11)
# token = np.full((src.shape[0],), start)
# output = []
# for t in range(10):
#     logits, state, _ = model.decode_step(state, token, t)
#     logits = np.array(logits)
#     logits[:, 0] = -np.inf  # never the padding id
#     token = np.argmax(logits, axis=-1)
#     output.append(token)
# print(np.stack(output, axis=1))  # (batch, 10) ids; an untrained model writes noise
# ```
# `Translator` does the same inside a compiled loop (it too never picks `[PAD]`), stopping
# each sentence at `[END]`.
# </details>
#
# <details><summary>3. Cache size</summary>
#
# Keys and values, each (B, heads, T, key_dim) with heads × key_dim = $d_\text{model}$:
# $2 B T d_\text{model}$ numbers per block. It grows linearly with the output length.
# </details>
