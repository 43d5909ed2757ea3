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
# # 02 · Bahdanau attention: an alignment model and a context vector per word
#
# Tutorial 01 squeezed the source sentence into one vector. Bahdanau, Cho and
# Bengio (2014, "Neural Machine Translation by Jointly Learning to Align and
# Translate") keep *all* the encoder states and let the decoder choose, for every
# word it writes, which of them to read. The first code cell prints which mode
# (QUICK or full) produced the outputs shown.

# %% [markdown]
# **What you will learn**
#
# * Bahdanau's alignment model, $e_{ij} = v^\top \tanh(W s_{i-1} + U h_j)$, and the context vector
#   it gives each output word;
# * how to check a layer against the formula in NumPy, masks included;
# * how to read an alignment heat map;
# * what attention changes in BLEU, sentence length by sentence length;
# * the decoder step $s_i = f(s_{i-1}, y_{i-1}, c_i)$ written as a small Keras layer, and checked
#   against the library's model.
#
# **What you need**: tutorial 01 (the data, the tokenizers, the fixed-vector model; its trained
# model is reused from the cache when 01 has run with the same settings).

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import figure_path
from keras_attention import evaluate_bleu, layers, models
from keras_attention.explain import explain
from keras_attention.explain.plotting import plot_attention

_common.start("02 Bahdanau attention")

# %% [markdown]
# ## The idea (paper, section 3)
#
# Old statistical translation systems modelled *alignment* explicitly: which source
# words does each target word come from? Bahdanau et al. make a soft, differentiable
# version of that and learn it together with the translation.
#
# * The encoder is a bidirectional RNN. Position $j$ gets an **annotation**
#   $h_j = [\overrightarrow{h}_j; \overleftarrow{h}_j]$ that describes word $j$ in
#   the context of the words on both sides.
# * Before writing word $i$, the decoder scores every annotation against its
#   previous state $s_{i-1}$ with a one-hidden-layer network, the **alignment model**
#   (appendix A.1.2): $e_{ij} = v^\top \tanh(W s_{i-1} + U h_j)$.
# * A softmax over $j$ turns the scores into weights $\alpha_{ij}$ (positive, summing
#   to one), and the **context vector** is the weighted average
#   $c_i = \sum_j \alpha_{ij} h_j$.
# * The decoder state is updated with it, $s_i = f(s_{i-1}, y_{i-1}, c_i)$, and the
#   next word is predicted from $s_i$, $c_i$ and $y_{i-1}$.
#
# Each target word thus gets its own context vector. Nothing tells the model what
# the right alignment is; the weights are whatever helps the translation loss.
#
# ## The layer on toy tensors
#
# `layers.BahdanauAttention(units)` is the alignment model plus the weighted sum.
# Its `query` is the decoder state, its `value` the annotations. Below: a batch of
# two sources of six positions, the second padded after four (`value_mask`).

# %%
attention = layers.BahdanauAttention(units=8)
annotations = keras.random.normal((2, 6, 10), seed=1)  # h_j: (batch, source length, 2 x encoder units)
source_mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
decoder_state = keras.random.normal((2, 5), seed=2)  # s_{i-1}: (batch, decoder units)

context, weights = attention(decoder_state, annotations, value_mask=source_mask, return_attention_scores=True)
print("context c_i:  ", tuple(context.shape), " (batch, annotation size)")
print("weights alpha:", tuple(weights.shape), " (batch, source length)")
print("weights sum to", np.round(keras.ops.sum(weights, axis=-1).numpy(), 6))
print("weights on the padded positions:", weights.numpy()[1, 4:])

# %% [markdown]
# The same numbers from the formula, written in NumPy with the layer's own
# weights ($W$ = `query_kernel`, $U$ = `key_kernel`, $v$ = `score_vector`):

# %%
W, U, v = attention.query_kernel.numpy(), attention.key_kernel.numpy(), attention.score_vector.numpy()
h, s = annotations.numpy(), decoder_state.numpy()
e = np.tanh((s @ W)[:, None, :] + h @ U) @ v  # e_ij: (batch, source length)
e = np.where(source_mask, e, -np.inf)
alpha = np.exp(e - e.max(-1, keepdims=True))
alpha /= alpha.sum(-1, keepdims=True)
c = np.einsum("bj,bjd->bd", alpha, h)
print("max |alpha - layer|:  ", np.abs(alpha - weights.numpy()).max())
print("max |context - layer|:", np.abs(c - context.numpy()).max())

# %% [markdown]
# During training the whole target is known, so all decoder steps can be scored at
# once: a query of rank 3 `(batch, target length, units)` gives one row of weights per
# target position. `Seq2SeqRNN` runs the layer step by step inside its recurrence
# instead, since $s_{i-1}$ only exists once step $i-1$ has run; it computes $U h_j$ once
# per sentence (`project_keys`), as the paper suggests.

# %%
all_states = keras.random.normal((2, 3, 5), seed=3)  # (batch, target length, decoder units)
_, all_weights = attention(all_states, annotations, value_mask=source_mask, return_attention_scores=True)
print("weights for 3 target positions:", tuple(all_weights.shape), " (batch, target, source)")

# %% [markdown]
# ## Training the attention model
#
# Same data, same tokenizers, same sizes and the same number of epochs as the
# fixed-vector model of tutorial 01; only `attention="bahdanau"` changes. The
# fixed-vector model is reloaded from the cache if tutorial 01 trained it with these
# settings, and trained here otherwise.

# %%
translation_data = _common.load_translation_data()
baseline, _ = _common.train_translator("rnn", translation_data)
translator, history = _common.train_translator("bahdanau", translation_data)
print(f"parameters: fixed vector {baseline.model.count_params():,}, "
      f"Bahdanau {translator.model.count_params():,}")

# %% [markdown]
# ## BLEU by source length, with and without attention
#
# Both models are scored on each length bucket of the test set, as in tutorial 01. The
# left panel shows the scores, the right one each bucket's score divided by the same
# model's score on the shortest bucket (1 minus that ratio is what the model loses with
# length). That relative change is the bottleneck argument: a single vector has to hold
# a longer sentence in the same size, so the fixed-vector model should lose more. The
# last lines print what attention adds in each bucket and both relative changes.

# %%
test_pairs = translation_data.test_pairs
rows = {name: _common.bleu_by_length(t, test_pairs) for name, t in
        (("fixed vector", baseline), ("Bahdanau", translator))}
print(f"{'words':>6} {'sentences':>9} {'fixed vector':>13} {'Bahdanau':>9}   (BLEU)")
for fixed, attended in zip(rows["fixed vector"], rows["Bahdanau"]):
    print(f"{fixed[0]:>6} {fixed[1]:9d} {fixed[2]:13.2f} {attended[2]:9.2f}")

# Each bucket's BLEU relative to the same model's shortest bucket: how much each model loses with length.
relative = {name: np.array([r[2] for r in buckets]) / (buckets[0][2] or np.nan) for name, buckets in rows.items()}
labels = [r[0] for r in rows["Bahdanau"]]
x = np.arange(len(labels))
fig, (absolute_ax, relative_ax) = plt.subplots(1, 2, figsize=(11, 3.6))
for offset, (name, color) in zip((-0.2, 0.2), (("fixed vector", "tab:gray"), ("Bahdanau", "tab:blue"))):
    absolute_ax.bar(x + offset, [r[2] for r in rows[name]], 0.4, label=name, color=color)
    relative_ax.plot(x, relative[name], "o-", label=name, color=color)
absolute_ax.set(xticks=x, xticklabels=labels, xlabel="English sentence length (words)", ylabel="BLEU")
relative_ax.axhline(1.0, color="black", linewidth=0.5)
relative_ax.set(xticks=x, xticklabels=labels, xlabel="English sentence length (words)",
                ylabel="BLEU / BLEU of the shortest bucket")
absolute_ax.legend()
fig.tight_layout()
fig.savefig(figure_path("02_bleu_by_length.png"), dpi=100)
gaps = [a[2] - f[2] for f, a in zip(rows["fixed vector"], rows["Bahdanau"])]
print("attention minus fixed vector, per bucket:", [round(g, 2) for g in gaps])
changes = {name: values[-1] - 1 for name, values in relative.items()}
worse = min(changes, key=changes.get)
if not np.isfinite(list(changes.values())).all():
    verdict = "a shortest bucket scored 0: nothing to compare"  # (a QUICK run)
else:
    verdict = f"the {worse} model loses more with length" if changes[worse] < 0 else "neither loses BLEU with length"
print(f"shortest to longest bucket: fixed vector {changes['fixed vector']:+.1%}, Bahdanau {changes['Bahdanau']:+.1%}; "
      f"{verdict}")
overall = evaluate_bleu(translator, test_pairs)
_common.result(f"BLEU {overall['bleu']:.1f} (greedy, {len(test_pairs)} test sentences)")

# %% [markdown]
# ## Alignment heat maps
#
# `Translator.translate(..., return_attention=True)` returns, next to the text, the
# weights $\alpha_{ij}$ of every output token and the source and output pieces to
# label them with. Each row of the map is one output token; it sums to one over the
# source pieces (which include the `[START]` and `[END]` markers).

# %%
examples = [en for en, _ in test_pairs[:2]]
result = translator.translate(examples, return_attention=True)
print("attention:", result.attention.shape, " (sentences, max output length, source length)")
for i, sentence in enumerate(examples):
    n_out, n_src = len(result.target_tokens[i]), len(result.source_tokens[i])
    rows_sum = result.attention[i, :n_out, :n_src].sum(-1)
    print(f"\nsource: {sentence}\noutput: {result.texts[i]}")
    print(f"map {n_out} x {n_src}; rows sum to {rows_sum.min():.3f}..{rows_sum.max():.3f}")
    plot_attention(
        result.attention[i], result.source_tokens[i], result.target_tokens[i],
        path=figure_path(f"02_alignment_{i + 1}.png"), title="Bahdanau attention",
    )

# %% [markdown]
# The figures are static. `keras_attention.explain` shows the same weights on an
# interactive page: a heatmap with the exact value of each cell on hover, and a "head
# view" where hovering (or tabbing to) an output word on the left shades the source
# pieces it attended to on the right. In Jupyter the object displays itself;
# `.save("attention.html")` writes one self-contained file that opens in any browser,
# and `keras-attention explain RUN "sentence" -o attention.html` does it from the
# command line.

# %%
explain(translator, examples)

# %% [markdown]
# Read a map row by row: each output piece and the source pieces it drew its context
# from. Nobody told the model which words correspond. What to look for: English and
# German word order mostly agree in these descriptions, so a model that has learned
# to align puts each row's weight near the diagonal, on the source word being
# translated, and spreads it out where the translation goes wrong. After a QUICK run the
# model has barely learned anything and the maps are nearly uniform.
#
# The lines printed with the BLEU chart compare the two models on the same data after
# the same two epochs. They are one run of each model, and the longest bucket holds 145
# sentences: one sample, not an average over seeds. Multi30k's sentences are short (95% have
# under 20 words), so the buckets span a narrow range of lengths.
# Bahdanau et al. trained on WMT sentences of up to 50
# words and found the fixed-vector model's BLEU falling steadily with sentence length
# while their attention model held up much better (their figure 2). The attention
# decoder looks a word up when it needs it instead of recovering it from one vector.

# %% [markdown]
# ## The decoder, written out
#
# `Seq2SeqRNN(attention="bahdanau")`, trained above, runs the paper's decoder inside its
# recurrence; here it is by hand. One step is a small Keras layer: the alignment model reads the previous
# state $s_{i-1}$ and gives the context $c_i$, then a GRU cell makes the new state from
# the previous word and the context, $s_i = f(s_{i-1}, y_{i-1}, c_i)$. The output layer
# reads $[s_i; c_i; y_{i-1}]$, the paper's $g(y_{i-1}, s_i, c_i)$ (equation 4; its appendix
# A.2.2 reads $s_{i-1}$ there and adds a maxout layer, both left out here). Around the step:
# the bidirectional GRU encoder, and a `tanh` layer that makes $s_0$ from the encoder's
# final forward and backward states (the paper uses the backward one).
# `keras.ops.scan` runs the step over the target positions, carrying the state (and
# the features, which it stacks into the output).

# %%
class BahdanauDecoderStep(keras.layers.Layer):
    """One decoder step: c_i from s_{i-1}, then s_i = GRU([y_{i-1}; c_i], s_{i-1})."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.attention = layers.BahdanauAttention(units)
        self.cell = keras.layers.GRUCell(units)

    def call(self, previous_state, previous_word, annotations, source_mask):
        context, weights = self.attention(previous_state, annotations, value_mask=source_mask,
                                          return_attention_scores=True)  # c_i (B, 2 x units), alpha_i (B, S)
        state, _ = self.cell(keras.ops.concatenate([previous_word, context], -1), [previous_state])  # s_i (B, units)
        return state, context, weights


class HandmadeBahdanau(keras.Model):
    """Bahdanau et al.'s encoder-decoder, with the decoder step above."""

    def __init__(self, source_vocab, target_vocab, embedding_dim, units, dropout, **kwargs):
        super().__init__(**kwargs)
        start = keras.initializers.RandomNormal(stddev=1.0)
        self.source_embedding = keras.layers.Embedding(source_vocab, embedding_dim, embeddings_initializer=start)
        self.target_embedding = keras.layers.Embedding(target_vocab, embedding_dim, embeddings_initializer=start)
        self.encoder = keras.layers.Bidirectional(keras.layers.GRU(units, return_sequences=True, return_state=True))
        self.bridge = keras.layers.Dense(units, activation="tanh")  # s_0 from the encoder's last states
        self.step = BahdanauDecoderStep(units)
        self.dropout = keras.layers.Dropout(dropout)
        self.output_layer = keras.layers.Dense(target_vocab)
        self.features_size = units + 2 * units + embedding_dim  # [s_i; c_i; y_{i-1}]

    def call(self, inputs, training=None):
        source_ids, target_in = inputs  # (B, S), (B, T)
        source_mask = keras.ops.not_equal(source_ids, 0)
        x = self.dropout(self.source_embedding(source_ids), training=training)
        annotations, forward, backward = self.encoder(x, mask=source_mask, training=training)  # h_j: (B, S, 2 x units)
        state = self.bridge(keras.ops.concatenate([forward, backward], -1))  # s_0: (B, units)
        words = self.dropout(self.target_embedding(target_in), training=training)  # y_{i-1}: (B, T, E)
        if not self.step.built:  # no variable can be made inside scan's loop: one call outside makes them
            self.step(state, words[:, 0], annotations, source_mask)

        def one_step(carry, word):  # carry: (s_{i-1}, the previous step's features)
            state, context, _ = self.step(carry[0], word, annotations, source_mask)
            carry = (state, keras.ops.concatenate([state, context, word], -1))  # features: [s_i; c_i; y_{i-1}]
            return carry, carry  # (carry for the next step, output to stack): the carries, over time

        features = keras.ops.zeros((keras.ops.shape(state)[0], self.features_size), state.dtype)
        _, (_, features) = keras.ops.scan(one_step, (state, features), keras.ops.transpose(words, (1, 0, 2)))
        features = keras.ops.transpose(features, (1, 0, 2))  # (B, T, units + 2 x units + E)
        return self.output_layer(self.dropout(features, training=training))  # (B, T, V) logits


# %% [markdown]
# Built on a batch of the training data:

# %%
vocabularies = (translation_data.source_tokenizer.vocab_size, translation_data.target_tokenizer.vocab_size)
handmade = HandmadeBahdanau(*vocabularies, **_common.SETTINGS.rnn)
(source_ids, target_in), _ = next(iter(translation_data.train_batches))
print("source:", tuple(source_ids.shape), " target in:", tuple(target_in.shape),
      " logits:", tuple(handmade((source_ids, target_in)).shape))

# %% [markdown]
# Trained briefly, with the optimizer, schedule and loss of the other models
# (`_common.compile_translation_model`), its loss falls:

# %%
steps = 4 if _common.QUICK else 50
_common.compile_translation_model(handmade, "bahdanau", steps, epochs=2)
handmade_history = handmade.fit(translation_data.train_batches.repeat(), steps_per_epoch=steps, epochs=2, verbose=0)
losses = [round(x, 3) for x in handmade_history.history["loss"]]
print(f"mean loss over batches 1-{steps} and {steps + 1}-{2 * steps}:", losses)

# %% [markdown]
# `Seq2SeqRNN(attention="bahdanau")` is this model. Given its weights, layer by layer, it
# computes the same logits:

# %%
model = models.Seq2SeqRNN(*vocabularies, attention="bahdanau", **_common.SETTINGS.rnn)
model((source_ids, target_in))  # create its weights
pairs = [(handmade.source_embedding, model.source_embedding), (handmade.target_embedding, model.target_embedding),
         (handmade.encoder, model.encoder), (handmade.bridge, model.bridges[0]),
         (handmade.step.attention, model.attention_layer), (handmade.step.cell, model.decoder_cell),
         (handmade.output_layer, model.output_projection)]
for ours_layer, library_layer in pairs:
    library_layer.set_weights(ours_layer.get_weights())
difference = np.abs(np.array(handmade((source_ids, target_in))) - np.array(model((source_ids, target_in)))).max()
print(f"parameters: handmade {handmade.count_params():,}, Seq2SeqRNN {model.count_params():,}; "
      f"largest logit difference on a batch: {difference:.1e}")
assert handmade.count_params() == model.count_params() and difference < 1e-4

# %% [markdown]
# Tutorial 03 keeps the model and changes how the scores are computed.

# %% [markdown]
# ## Recap
#
# * Attention keeps every encoder annotation $h_j$; for each output word the decoder scores
#   them against its previous state and reads their weighted average.
# * The weights are a softmax over source positions: positive, summing to one, zero on
#   padding (the NumPy check shows the layer computes exactly the formula).
# * Nobody tells the model which words correspond: the alignment is whatever helps the
#   translation loss.
# * The BLEU table compares the fixed-vector model and the attention model trained on the same
#   data for the same epochs.
# * Relative to its own shortest bucket, each model loses BLEU on long sentences; the bottleneck
#   argument is that the fixed-vector model loses more (the line printed before the result
#   says whether it did).
# * The decoder step is a small layer: the context from $s_{i-1}$, then a GRU cell on
#   $[y_{i-1}; c_i]$; `Seq2SeqRNN` with the same weights gives the same logits.
#
# ## Exercises
#
# 1. In the NumPy re-derivation, leave out the line that applies `source_mask`. Which
#    weights change, and why only those? *Hint:* it is the `np.where(source_mask, ...)` line;
#    compare `alpha` with and without it, sentence by sentence, next to `source_mask`.
# 2. Multiply the layer's `score_vector` by 10 and call it again on the same inputs. What
#    happens to the largest weight of each row? *Hint:*
#    `attention.score_vector.assign(10 * attention.score_vector)`.
# 3. Translate a sentence of your own with `return_attention=True` and list, for each output
#    piece, the source piece with the largest weight. *Hint:* `result.attention[0].argmax(-1)`.
#
# ## Papers
#
# * Bahdanau, Cho and Bengio (2014). [Neural Machine Translation by Jointly Learning to Align and Translate](https://arxiv.org/abs/1409.0473).
#
# ## Solutions
#
# <details><summary>1. Without the mask</summary>
#
# Only the second sentence changes: its two padded positions now get weight, and the real
# positions' weights shrink so that each row still sums to one. The first sentence has no
# padding, so the mask changes nothing there.
# </details>
#
# <details><summary>2. A larger score vector</summary>
#
# Every score $e_{ij}$ is multiplied by 10, so the softmax becomes sharper: the largest
# weight of each row grows towards 1 and the others shrink (the order of the weights does not
# change). This is the same effect as the `scale` of tutorial 05.
# </details>
#
# <details><summary>3. The strongest source piece</summary>
#
# ```python
# result = translator.translate(["Two dogs run on the beach."], return_attention=True)
# source, output = result.source_tokens[0], result.target_tokens[0]
# for piece, row in zip(output, result.attention[0]):
#     print(piece, "<-", source[row[: len(source)].argmax()])
# ```
# </details>
