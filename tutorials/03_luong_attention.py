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
# # 03 · Luong attention: three scores, global and local, soft and hard
#
# A year after Bahdanau et al., Luong, Pham and Manning (2015, "Effective Approaches
# to Attention-based Neural Machine Translation") simplified the recipe and asked
# two questions: how should a decoder state be compared with an encoder state, and
# must the decoder look at every source word? The first code cell prints which mode
# produced the outputs shown.

# %% [markdown]
# **What you will learn**
#
# * Luong's three scores (`dot`, `general`, `concat`) and which decoder state asks;
# * input feeding and the attentional hidden state $\tilde h_t = \tanh(W_c [c_t; h_t])$;
# * global against local (local-p) attention, and soft against hard attention;
# * how a Luong model trains next to the models of tutorials 01 and 02;
# * the decoder step with input feeding written as a small Keras layer, and checked against the
#   library's model.
#
# **What you need**: tutorials 01 and 02 (their trained models are reused from the cache when
# they have run with the same settings).

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import evaluate_bleu, layers, models
from keras_attention.explain import explain
from keras_attention.explain.plotting import plot_attention

_common.start("03 Luong attention")

# %% [markdown]
# ## What changes compared with Bahdanau (section 3)
#
# * **Which state asks.** Bahdanau's query is the *previous* decoder state
#   $s_{i-1}$, and the context enters the recurrence. Luong runs the RNN step first and
#   queries with the *current* top state $h_t$: $h_t \to a_t \to c_t$.
# * **How the output is made.** The context and the state are merged into an
#   *attentional state* $\tilde h_t = \tanh(W_c [c_t; h_t])$, and the next-word
#   softmax reads $\tilde h_t$.
# * **Input feeding** (section 3.3). $\tilde h_t$ is also concatenated to the next
#   step's input, so the decoder knows directly where it attended before; without it,
#   each step would choose its alignment without seeing the previous choices.
# * **The score** between $h_t$ and an encoder state $\bar h_s$ (equation 8):
#   * `dot`: $h_t^\top \bar h_s$, no parameters;
#   * `general`: $h_t^\top W_a \bar h_s$, a learned bilinear form;
#   * `concat`: $v_a^\top \tanh(W_a [h_t; \bar h_s])$, Bahdanau's additive form.
#
# `Seq2SeqRNN(attention="luong")` implements the first three points; the score is
# `layers.LuongAttention(score=...)`.

# %%
decoder_states = keras.random.normal((2, 4, 6), seed=1)  # h_t: (batch, target length, units)
encoder_states = keras.random.normal((2, 9, 6), seed=2)  # h̄_s: (batch, source length, units)
luong = {}
for score in ("dot", "general", "concat"):
    luong[score] = layers.LuongAttention(score=score)
    context, weights = luong[score](decoder_states, encoder_states, return_attention_scores=True)
    print(f"{score:8s} context {tuple(context.shape)}, weights {tuple(weights.shape)}, "
          f"parameters {luong[score].count_params()}")

# %% [markdown]
# `dot` and `general` in NumPy, with the layer's own $W_a$ (`general_kernel`):

# %%
h_t, h_s = decoder_states.numpy(), encoder_states.numpy()


def softmax(x):
    x = np.exp(x - x.max(-1, keepdims=True))
    return x / x.sum(-1, keepdims=True)


W_a = luong["general"].general_kernel.numpy()
for score, e in (("dot", np.einsum("btd,bsd->bts", h_t, h_s)),
                 ("general", np.einsum("btd,bsd->bts", h_t, h_s @ W_a))):
    _, weights = luong[score](decoder_states, encoder_states, return_attention_scores=True)
    print(f"{score:8s} max |numpy - layer| = {np.abs(softmax(e) - weights.numpy()).max():.2e}")

# %% [markdown]
# `dot` needs the two states to have the same size and learns nothing; `general`
# lets the model learn which directions of the two spaces should match. Luong et al.
# found `dot` to work well with global attention and `general` with local attention;
# the model below uses `general`, the library's default.
#
# ## Global and local attention (sections 3.1 and 3.2)
#
# *Global* attention, like Bahdanau's, weighs every source position for every target
# word. *Local* attention first guesses one source position and reads only a window
# of $2D + 1$ positions around it. In the predictive variant (local-p) the guess is
#
# $$p_t = S \cdot \sigma(v_p^\top \tanh(W_p h_t)),$$
#
# a number between 0 and the source length $S$; the softmax runs inside the window
# $[p_t - D, p_t + D]$ only, and the weights are multiplied by a Gaussian centred on
# $p_t$ with $\sigma = D/2$, so positions near the guess count most. The Gaussian also
# makes $p_t$ trainable by back-propagation. (The other variant, local-m, simply takes
# $p_t = t$, assuming the two sentences run in step.) `LuongAttention(window=D)` does
# local-p.
#
# To see the difference, give a local layer the same $W_a$ as a global one and
# compare the weights of one query over a 16-word source.

# %%
query = keras.random.normal((1, 6), seed=3)  # one decoder step: (batch, units)
source = keras.random.normal((1, 16, 6), seed=4)  # (batch, source length, units)
global_attention = layers.LuongAttention(score="general")
local_attention = layers.LuongAttention(score="general", window=2)
_, global_weights = global_attention(query, source, return_attention_scores=True)
local_attention(query, source)  # build the weights
local_attention.general_kernel.assign(global_attention.general_kernel)
_, local_weights = local_attention(query, source, return_attention_scores=True)
p_t = float(local_attention.predicted_position(query, source)[0])
global_weights, local_weights = global_weights.numpy()[0], local_weights.numpy()[0]

print(f"predicted position p_t = {p_t:.2f}, window D = 2")
print("non-zero local weights at positions", np.flatnonzero(local_weights).tolist())
print(f"sum of weights: global {global_weights.sum():.3f}, local {local_weights.sum():.3f} "
      "(the Gaussian only scales down)")

positions = np.arange(16)
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.bar(positions - 0.2, global_weights, 0.4, label="global", color="tab:gray")
ax.bar(positions + 0.2, local_weights, 0.4, label="local-p, D = 2", color="tab:orange")
grid = np.linspace(0, 15, 300)
ax.plot(grid, np.exp(-((grid - p_t) ** 2) / (2 * 1.0**2)) * local_weights.max(), "--", color="tab:orange",
        label="Gaussian around $p_t$ (scaled)")
ax.axvline(p_t, color="black", lw=0.8)
ax.axvspan(p_t - 2, p_t + 2, color="tab:orange", alpha=0.08, label="window $[p_t - D, p_t + D]$")
ax.set_xlabel("source position")
ax.set_ylabel("attention weight")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(figure_path("03_global_vs_local.png"), dpi=100)

# %% [markdown]
# ## Soft and hard attention
#
# Everything so far is *soft* attention: the context is a weighted average, so it is
# a smooth function of the scores and gradients flow through it. Xu et al. (2015,
# "Show, Attend and Tell") also trained *hard* attention, which samples **one**
# position $s \sim \alpha$ and uses only $h_s$. Sampling has no gradient with respect
# to $\alpha$; they trained it with a REINFORCE-style estimator, noisier and slower to
# train. The two are closely related: the soft context is the *expected value* of the
# hard one, which we can check by averaging many hard samples.

# %%
rng = np.random.default_rng(0)
alpha = global_weights.astype("float64")
alpha /= alpha.sum()
values = source.numpy()[0]  # (source length, units)
soft_context = alpha @ values
for n in (10, 100, 1000, 10000):
    picks = rng.choice(len(alpha), size=n, p=alpha)
    hard_average = values[picks].mean(0)
    print(f"{n:6d} hard samples: |average - soft context| = {np.linalg.norm(hard_average - soft_context):.3f}")

# %% [markdown]
# Local attention sits between the two: like hard attention it reads a small part of
# the source, like soft attention it stays differentiable.
#
# ## Training the Luong model
#
# The same data and number of epochs as tutorials 01 and 02, with
# `Seq2SeqRNN(attention="luong", luong_score="general")`: global attention, input
# feeding. The two earlier models come from the cache when those tutorials have run.

# %%
translation_data = _common.load_translation_data()
test_pairs = translation_data.test_pairs
results = {}
for kind in ("rnn", "bahdanau", "luong"):
    translator, _ = _common.train_translator(kind, translation_data)
    results[kind] = (translator, evaluate_bleu(translator, test_pairs))
print(f"\n{'model':10s} {'BLEU':>6} {'lower-cased':>12}  ({len(test_pairs)} test sentences)")
for kind, (_, scores) in results.items():
    print(f"{kind:10s} {scores['bleu']:6.2f} {scores['bleu_lowercase']:12.2f}")
_common.result(f"BLEU {results['luong'][1]['bleu']:.1f} (Luong, greedy, "
               f"{len(test_pairs)} test sentences)")

# %% [markdown]
# All three models had the same data and the same number of epochs
# (`_common.SETTINGS.rnn_epochs`), so the table compares how fast each design learns
# under a small budget, not where each ends up; they also differ in size (tutorial 10's
# table prints their parameter counts). Luong et al. trained for 10 to 12 epochs on
# WMT.
#
# One change to the paper is on by default in `Seq2SeqRNN`: the `general` and `dot`
# scores are divided by $\sqrt{\text{units}}$ (`luong_scaled=True`), as the Transformer
# divides its dot products by $\sqrt{d_k}$ (tutorial 06). Unscaled, the score is a
# product of two learned vectors through a learned $W_a$, and its size grows with all
# three; large scores make the softmax nearly one-hot, and a nearly one-hot softmax has
# almost no gradient (tutorial 06 shows both). `Seq2SeqRNN(attention="luong",
# luong_scaled=False)` trains the paper's version. To train local-p, pass
# `luong_window=D`.

# %% [markdown]
# ## The trained model's alignment
#
# The Luong model of the table, on a test sentence:

# %%
translator = results["luong"][0]
sentence = test_pairs[3][0]
result = translator.translate([sentence], return_attention=True)
print("source:", sentence, "\noutput:", result.texts[0])
print("attention:", result.attention.shape, " (sentences, max output length, source length)")
figure = plot_attention(result.attention[0], result.source_tokens[0], result.target_tokens[0],
                        path=figure_path("03_alignment.png"), title="Luong attention (general, global)")

# %% [markdown]
# The same alignment on an interactive page (tutorial 02 introduced it): hover a word
# of the translation on the left of the head view to see which source pieces it read.

# %%
explain(translator, [sentence])

# %% [markdown]
# ## The decoder, written out
#
# `Seq2SeqRNN(attention="luong")` runs this decoder inside its recurrence; here it is by
# hand. One step is a small Keras layer, in Luong's order: the GRU cell runs first, on
# the previous word and the previous attentional state (input feeding), $h_t =
# f(h_{t-1}, [y_{t-1}; \tilde h_{t-1}])$; then $h_t$ asks the `general` score for the
# context $c_t$ (divided by $\sqrt{\text{units}}$, as `Seq2SeqRNN` does by default; see
# above); then $\tilde h_t = \tanh(W_c [c_t; h_t])$, which the output layer reads
# and the next step is fed. The encoder and the `tanh` layer that makes the first state
# are those of tutorial 02's model, and $\tilde h_0 = 0$. `keras.ops.scan` runs the step
# over the target positions, carrying $(h_t, \tilde h_t)$ and stacking them.

# %%
class LuongDecoderStep(keras.layers.Layer):
    """One decoder step with input feeding: h_t from [y_{t-1}; h~_{t-1}], c_t from h_t, h~_t = tanh(W_c [c_t; h_t])."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.cell = keras.layers.GRUCell(units)
        self.attention = layers.LuongAttention(score="general", scaled=True)  # scores / sqrt(units)
        self.combine = keras.layers.Dense(units, activation="tanh", use_bias=False)  # W_c

    def call(self, previous_state, previous_attentional, previous_word, encoder_states, source_mask):
        cell_input = keras.ops.concatenate([previous_word, previous_attentional], -1)  # input feeding
        state, _ = self.cell(cell_input, [previous_state])  # h_t (B, units)
        context, weights = self.attention(state, encoder_states, value_mask=source_mask,
                                          return_attention_scores=True)  # c_t (B, 2 x units), a_t (B, S)
        attentional = self.combine(keras.ops.concatenate([context, state], -1))  # h~_t (B, units)
        return state, attentional, weights


class HandmadeLuong(keras.Model):
    """Luong's decoder (global attention, input feeding) on tutorial 02's encoder."""

    def __init__(self, source_vocab, target_vocab, embedding_dim, units, dropout, **kwargs):
        super().__init__(**kwargs)
        start = keras.initializers.RandomNormal(stddev=1.0)
        self.source_embedding = keras.layers.Embedding(source_vocab, embedding_dim, embeddings_initializer=start)
        self.target_embedding = keras.layers.Embedding(target_vocab, embedding_dim, embeddings_initializer=start)
        self.encoder = keras.layers.Bidirectional(keras.layers.GRU(units, return_sequences=True, return_state=True))
        self.bridge = keras.layers.Dense(units, activation="tanh")  # h_0 from the encoder's last states
        self.step = LuongDecoderStep(units)
        self.dropout = keras.layers.Dropout(dropout)
        self.output_layer = keras.layers.Dense(target_vocab)

    def call(self, inputs, training=None):
        source_ids, target_in = inputs  # (B, S), (B, T)
        source_mask = keras.ops.not_equal(source_ids, 0)
        x = self.dropout(self.source_embedding(source_ids), training=training)
        encoder_states, forward, backward = self.encoder(x, mask=source_mask, training=training)  # (B, S, 2 x units)
        state = self.bridge(keras.ops.concatenate([forward, backward], -1))  # h_0: (B, units)
        attentional = keras.ops.zeros_like(state)  # h~_0
        words = self.dropout(self.target_embedding(target_in), training=training)  # y_{t-1}: (B, T, E)
        if not self.step.built:  # no variable can be made inside scan's loop: one call outside makes them
            self.step(state, attentional, words[:, 0], encoder_states, source_mask)

        def one_step(carry, word):  # carry: (h_{t-1}, h~_{t-1})
            state, attentional, _ = self.step(*carry, word, encoder_states, source_mask)
            return (state, attentional), (state, attentional)  # (carry for the next step, output to stack)

        by_time = keras.ops.transpose(words, (1, 0, 2))  # (T, B, E): scan runs over time
        _, (_, attentional) = keras.ops.scan(one_step, (state, attentional), by_time)  # (T, B, units)
        attentional = keras.ops.transpose(attentional, (1, 0, 2))  # (B, T, units)
        return self.output_layer(self.dropout(attentional, training=training))  # (B, T, V) logits


# %% [markdown]
# Built on a batch of the training data, then trained briefly with the recipe of the other
# models (`_common.compile_translation_model`):

# %%
vocabularies = (translation_data.source_tokenizer.vocab_size, translation_data.target_tokenizer.vocab_size)
handmade = HandmadeLuong(*vocabularies, **_common.SETTINGS.rnn)
(source_ids, target_in), _ = next(iter(translation_data.train_batches))
print("source:", tuple(source_ids.shape), " target in:", tuple(target_in.shape),
      " logits:", tuple(handmade((source_ids, target_in)).shape))
steps = 4 if _common.QUICK else 50
_common.compile_translation_model(handmade, "luong", steps, epochs=2)  # the other models' recipe
handmade_history = handmade.fit(translation_data.train_batches.repeat(), steps_per_epoch=steps, epochs=2, verbose=0)
losses = [round(x, 3) for x in handmade_history.history["loss"]]
print(f"mean loss over batches 1-{steps} and {steps + 1}-{2 * steps}:", losses)

# %% [markdown]
# Its loss falls. `Seq2SeqRNN(attention="luong")` is this model: given its weights, layer
# by layer, it computes the same logits.

# %%
model = models.Seq2SeqRNN(*vocabularies, attention="luong", **_common.SETTINGS.rnn)
model((source_ids, target_in))  # create its weights
pairs = [(handmade.source_embedding, model.source_embedding), (handmade.target_embedding, model.target_embedding),
         (handmade.encoder, model.encoder), (handmade.bridge, model.bridges[0]),
         (handmade.step.cell, model.decoder_cell), (handmade.step.attention, model.attention_layer),
         (handmade.step.combine, model.luong_combine), (handmade.output_layer, model.output_projection)]
for ours_layer, library_layer in pairs:
    library_layer.set_weights(ours_layer.get_weights())
difference = np.abs(np.array(handmade((source_ids, target_in))) - np.array(model((source_ids, target_in)))).max()
print(f"parameters: handmade {handmade.count_params():,}, Seq2SeqRNN {model.count_params():,}; "
      f"largest logit difference on a batch: {difference:.1e}")
assert handmade.count_params() == model.count_params() and difference < 1e-4

# %% [markdown]
# Tutorial 04 uses attention with no recurrence at all, to compare two sentences;
# tutorial 05 then steps back from translation: an attention layer is a lookup of values
# by keys, and a sentence can look things up in itself.

# %% [markdown]
# ## Recap
#
# * Luong runs the decoder step first and attends with the *current* state $h_t$; Bahdanau
#   attends with the previous one.
# * `dot` has no parameters, `general` learns a bilinear form $W_a$, `concat` is Bahdanau's
#   additive score.
# * Local-p attention predicts a position $p_t$ and weighs a window of $2D + 1$ positions with
#   a Gaussian around it; it stays differentiable.
# * Soft attention's context is the expected value of hard attention's sampled context (the
#   averages of many samples approach it).
# * The decoder step with input feeding is a small layer: a GRU cell on $[y_{t-1}; \tilde h_{t-1}]$,
#   the context from $h_t$, then $\tilde h_t$; `Seq2SeqRNN` with the same weights gives the same logits.
#
# ## Exercises
#
# 1. Show that `dot` is `general` with $W_a = I$. *Hint:*
#    `luong["general"].general_kernel.assign(np.eye(6))`, then compare the two layers' weights.
# 2. Give the local layer a window of $D = 4$. How many source positions can get a non-zero
#    weight? *Hint:* `layers.LuongAttention(score="general", window=4)`.
# 3. In the hard-attention cell, the distance between the average of $n$ samples and the soft
#    context falls as $n$ grows. By about how much for ten times more samples, and why?
#    *Hint:* compare the printed distances line by line, and recall how the spread of a mean
#    of $n$ independent draws depends on $n$.
#
# ## Papers
#
# * Luong, Pham and Manning (2015). [Effective Approaches to Attention-based Neural Machine Translation](https://arxiv.org/abs/1508.04025).
# * Bahdanau, Cho and Bengio (2014). [Neural Machine Translation by Jointly Learning to Align and Translate](https://arxiv.org/abs/1409.0473).
# * Xu et al. (2015). [Show, Attend and Tell: Neural Image Caption Generation with Visual Attention](https://arxiv.org/abs/1502.03044).
#
# ## Solutions
#
# <details><summary>1. dot is general with the identity</summary>
#
# ```python
# luong["general"].general_kernel.assign(np.eye(6, dtype="float32"))
# _, w_dot = luong["dot"](decoder_states, encoder_states, return_attention_scores=True)
# _, w_general = luong["general"](decoder_states, encoder_states, return_attention_scores=True)
# print(np.abs(w_dot.numpy() - w_general.numpy()).max())  # 0, up to float rounding
# assert np.allclose(w_dot.numpy(), w_general.numpy(), atol=1e-6)
# ```
# $h_t^\top I \bar h_s = h_t^\top \bar h_s$.
# </details>
#
# <details><summary>2. A wider window</summary>
#
# At most $2D + 1 = 9$ positions, the ones within $D$ of $p_t$; fewer when $p_t$ is near
# either end of the sentence.
# </details>
#
# <details><summary>3. Hard samples</summary>
#
# About $\sqrt{10} \approx 3.2$ times smaller. The average of $n$ independent samples is
# an unbiased estimate of the soft context, and its error shrinks like $1/\sqrt{n}$ (the
# printed distances are random, so the ratio only holds roughly).
# </details>
