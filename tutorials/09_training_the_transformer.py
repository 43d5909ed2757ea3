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
# # 09 · Training the Transformer, and how it compares
#
# Tutorials 04 to 08 assembled the parts; `models.Transformer` puts them together:
# embeddings with positions, a stack of encoder blocks, a stack of decoder blocks and an
# output layer that shares its weights with the target embedding (section 3.4). This
# tutorial covers the training recipe of section 5 (a warm-up learning-rate schedule,
# label smoothing), decodes with beam search, and ends with a table of every
# translation model of this series trained and scored in the same setting. The first
# code cell prints which mode produced the outputs.

# %% [markdown]
# **What you will learn**
#
# * the paper's learning-rate schedule (warm-up, then inverse square root) and label smoothing;
# * how to train `models.Transformer` on Multi30k and decode it greedily and with beam search;
# * how to look at each cross-attention head of a trained model;
# * how the four translation models of this series compare on one time budget.
#
# **What you need**: tutorials 01 to 08. The RNN models of 01 to 03 are reused from the cache
# when those tutorials have run with the same settings, and trained here otherwise.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import QUICK, SETTINGS, figure_path
from keras_attention.explain import explain
from keras_attention.plotting import plot_attention_heads, plot_history, plot_schedule
from keras_attention import evaluate_bleu
from keras_attention.training import MaskedSparseCrossEntropy, TransformerSchedule

_common.start("09 Training the Transformer")

# %% [markdown]
# ## The learning rate: warm up, then decay (section 5.3)
#
# The paper trains with Adam ($\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$)
# and a learning rate that rises linearly for `warmup_steps` steps and then decays
# with the inverse square root of the step:
#
# $$\text{lrate} = d_\text{model}^{-0.5} \cdot \min(\text{step}^{-0.5},\ \text{step} \cdot \text{warmup\_steps}^{-1.5}).$$
#
# Early in training Adam's running estimates of the gradient's scale are based on very
# few steps, and a post-norm Transformer is easily thrown off by large updates; starting
# small avoids both. With $d_\text{model} = 512$ and 4,000 warm-up steps the peak is
# about $7 \times 10^{-4}$. `training.TransformerSchedule` is this formula, with an
# optional `scale`.

# %%
paper = TransformerSchedule(d_model=512, warmup_steps=4000)
plot_schedule(paper, 40000, path=figure_path("09_schedule.png"))
for step in (1, 1000, 4000, 10000, 40000):
    print(f"step {step:6d}: learning rate {float(paper(step - 1)):.2e}")

# %% [markdown]
# Our runs are far shorter than the paper's 100,000 steps, so `_common.compile_translation_model`
# warms up over the first 5% of the steps and scales the schedule so that its peak is
# $10^{-3}$, as `keras-attention train` does.

# %%
translation_data = _common.load_translation_data()
steps_per_epoch = sum(1 for _ in translation_data.train_batches)
total = steps_per_epoch * SETTINGS.transformer_epochs
model = _common.build_translation_model("transformer", translation_data)
warmup = max(1, total // 20)
ours = TransformerSchedule(model.d_model, warmup, scale=1e-3 / (model.d_model * warmup) ** -0.5)
print(f"{steps_per_epoch} steps an epoch, {total} in all; warm-up {warmup} steps, "
      f"peak {float(ours(warmup - 1)):.1e}, last {float(ours(total - 1)):.1e}")

# %% [markdown]
# ## Label smoothing (section 5.4)
#
# Cross-entropy against a one-hot target keeps rewarding the model for making the
# correct word's probability ever closer to 1, which it can only do by growing its
# logits without bound. Label smoothing with $\epsilon = 0.1$ trains against a target
# that puts $1 - \epsilon$ on the correct word and spreads $\epsilon$ over the whole
# vocabulary. The loss then has a minimum at a finite confidence. The paper notes that
# this hurts perplexity, because the model learns to be less sure, but improves
# accuracy and BLEU. Below, the library's `MaskedSparseCrossEntropy` for a model whose
# correct logit is `margin` above all the others, in a 1,000-word vocabulary.

# %%
vocabulary = 1000
margins = np.linspace(0, 20, 81)
logits = np.zeros((len(margins), 1, vocabulary), "float32")
logits[:, 0, 7] = margins  # word 7 is the right one
y_true = np.full((1, 1), 7)
curves = {}
for eps in (0.0, 0.1):
    loss = MaskedSparseCrossEntropy(label_smoothing=eps)
    curves[eps] = [float(loss(y_true, logits[i : i + 1])) for i in range(len(margins))]
    best = margins[int(np.argmin(curves[eps]))]
    print(f"label smoothing {eps}: loss at margin 20 = {curves[eps][-1]:.3f}, lowest at margin {best:.2f}")
fig, ax = plt.subplots(figsize=(5.5, 3.2))
for eps, curve in curves.items():
    ax.plot(margins, curve, label=f"ε = {eps}")
ax.set_xlabel("logit margin of the correct word")
ax.set_ylabel("loss")
ax.legend()
fig.tight_layout()
fig.savefig(figure_path("09_label_smoothing.png"), dpi=100)

# %% [markdown]
# ## Training
#
# The "tiny" preset (2 + 2 blocks, $d_\text{model} = 128$, 4 heads, $d_\text{ff} = 512$,
# dropout 0.1) on the same Multi30k batches as the RNN models, with the loss above
# ($\epsilon = 0.1$), masked token accuracy and the scaled schedule. The paper's base
# model is 6 + 6 blocks of width 512 trained for 12 hours on 8 GPUs.

# %%
translator, history = _common.train_translator("transformer", translation_data)
model = translator.model
print(f"parameters: {model.count_params():,}; training took {history['train_seconds']:.0f} s")
plot_history(history, metrics=("loss", "token_accuracy"), path=figure_path("09_history.png"))

# %% [markdown]
# ## Greedy decoding and beam search
#
# Greedy decoding commits to the most probable word at every step. Beam search keeps
# the `beam_size` most probable partial translations instead, extends each by every
# word, and keeps the best `beam_size` of the results, so a word that looks slightly
# worse now can win when the sentence is finished. Longer hypotheses collect more
# negative log-probabilities, so scores are divided by a length penalty
# $((5 + |Y|)/6)^\alpha$ (Wu et al., 2016). The paper used a beam of 4 and
# $\alpha = 0.6$; so do we.

# %%
test_pairs = translation_data.test_pairs
scores = {}
for method, options in (("greedy", {}), ("beam", dict(beam_size=4, length_penalty=0.6))):
    started = time.time()
    scores[method] = evaluate_bleu(translator, test_pairs, method=method, **options)
    print(f"{method:6s}: BLEU {scores[method]['bleu']:.2f}, lower-cased {scores[method]['bleu_lowercase']:.2f}, "
          f"chrF {scores[method]['chrf']:.2f} ({time.time() - started:.0f} s for {len(test_pairs)} sentences)")
for i in range(2):
    print(f"\nsource: {test_pairs[i][0]}\nreference: {test_pairs[i][1]}")
    print(f"greedy: {scores['greedy']['hypotheses'][i]}\nbeam:   {scores['beam']['hypotheses'][i]}")

# %% [markdown]
# ## What the heads look at
#
# `Translator` returns the cross-attention averaged over heads. To see each head,
# run the decoder once more over the translation it produced (teacher forcing with
# its own output) and ask the last block for its cross-attention, one map per head.

# %%
sentence = next(en for en, _ in test_pairs if 7 <= len(en.split()) <= 9)  # short enough to read
result = translator.translate([sentence], return_attention=True)
source_ids, _ = translator.source_ids([sentence])
output_ids = result.tokens[0][result.tokens[0] != 0]
target_in = np.concatenate([[translator.target_tokenizer.start_id], output_ids])[None]
encoder_output, source_mask = model.encode(source_ids)
_, heads = model.decode(target_in, encoder_output, source_mask, return_attention=True)
print("source:", sentence, "\noutput:", result.texts[0])
print("cross-attention of the last block:", tuple(heads.shape), " (batch, heads, target, source)")
figure = plot_attention_heads(heads[0].numpy()[:, : len(result.target_tokens[0])], result.source_tokens[0],
                              ["[START]"] + result.target_tokens[0][:-1], columns=2)
figure.set_size_inches(9, 8)
figure.tight_layout()
figure.savefig(figure_path("09_cross_attention_heads.png"), dpi=100)

# %% [markdown]
# Rows are labelled with the decoder's *input* at each position: the map on the row of
# `[START]` is where the model looked to choose the first word. Heads differ: some
# follow the source word being translated, others spread out or rest on the sentence
# boundaries. How clean the maps are depends on how long the model trained.
#
# The figure shows one block. `explain` collects every weight of the translation
# (encoder self-attention, causal decoder self-attention and cross-attention, for each
# block and head) and shows them on one interactive page: choose the kind, the layer
# and the head (or their mean), and hover a word to see what it reads. In Jupyter the
# object displays itself; `.save("attention.html")` writes a file that opens in any
# browser without a network (`keras-attention explain RUN "sentence" -o page.html`
# does the same from the command line).

# %%
page = explain(translator, [sentence])
print("weights collected:", {kind: w.shape for kind, w in page.sentences[0].weights.items()},
      " (layers, heads, queries, keys)")
page

# %% [markdown]
#
# ## The four models side by side
#
# The four translation models of this series, trained on the same data with the same
# tokenizers and scored on the same test sentences, each for the epochs set in
# `_common.SETTINGS`: two for the RNNs, six for the Transformer, so that each trains for
# roughly the same few minutes. This compares what each design reaches on a small time
# budget, not after the same number of passes over the data. Models already trained by
# tutorials 01 to 03 come from the cache.

# %%
rows = []
for kind, name in (("rnn", "RNN, fixed vector (01)"), ("bahdanau", "RNN + Bahdanau (02)"),
                   ("luong", "RNN + Luong (03)"), ("transformer", "Transformer (09)")):
    trained, run = _common.train_translator(kind, translation_data)
    greedy = evaluate_bleu(trained, test_pairs)
    rows.append((name, "greedy", trained.model.count_params(), run["train_seconds"], greedy))
rows.append(("Transformer (09)", "beam 4", model.count_params(), history["train_seconds"], scores["beam"]))

header = f"| model | decoding | parameters | training (s) | BLEU | BLEU (lower-cased) | chrF |"
print(header + "\n|---|---|---:|---:|---:|---:|---:|")
for name, method, params, seconds, s in rows:
    print(f"| {name} | {method} | {params:,} | {seconds:.0f} | {s['bleu']:.2f} | {s['bleu_lowercase']:.2f} | {s['chrf']:.1f} |")
print(f"\n{len(test_pairs)} sentences of Multi30k test_2016_flickr, English to German, sacreBLEU 13a; "
      f"{'QUICK mode' if QUICK else 'full mode'}: {SETTINGS.train_pairs or 29000} training pairs, "
      f"{SETTINGS.rnn_epochs} epoch(s) for the RNNs, {SETTINGS.transformer_epochs} for the Transformer.")

fig, ax = plt.subplots(figsize=(7, 3.2))
labels = [f"{name}\n{method}" for name, method, *_ in rows]
ax.barh(labels[::-1], [r[4]["bleu_lowercase"] for r in rows][::-1], color="tab:blue")
ax.set_xlabel("BLEU (lower-cased)")
fig.tight_layout()
fig.savefig(figure_path("09_results.png"), dpi=100)

# %% [markdown]
# The table is computed every time this tutorial runs; nothing in it is typed in. In
# the full run shown in the notebook, the Transformer, with the fewest parameters, and
# Bahdanau's RNN are level with greedy decoding (about 23.6 BLEU each), and beam search
# adds under a point to the Transformer; the fixed-vector RNN has about 10, and the
# Luong RNN trails with about 8 after its two epochs (tutorial 03 shows its nearly
# one-hot attention). The RNNs had fewer epochs
# than the Transformer because each of their epochs costs more: their decoders run
# step by step, a Transformer's all positions at once. The training column shows the
# seconds each model took on the machine that built the notebook (two CPU cores).
# Longer training changes all the numbers: the results page of the documentation has
# the same models trained for 12 (RNNs) and 30 (Transformer) epochs.
#
# For scale: the paper's base model, 65 million parameters trained on the 4.5 million
# sentence pairs of WMT 2014, reached 27.3 BLEU on newstest2014 English-German and the
# big model 28.4. Multi30k scores are not comparable with those (shorter, simpler
# sentences, one reference, another test set).

# %% [markdown]
# ## Recap
#
# * $\text{lrate} = d_\text{model}^{-0.5} \min(\text{step}^{-0.5}, \text{step} \cdot \text{warmup}^{-1.5})$
#   rises for `warmup_steps` steps and then decays.
# * With label smoothing the loss has its minimum at a finite logit margin.
# * Beam search keeps `beam_size` partial translations and ranks them with a length penalty.
# * Different heads of a trained model attend to different things.
# * The final table compares the models on a stated budget; the documentation's results page
#   has them trained longer.
#
# ## Exercises
#
# 1. Show that the schedule's peak is $(d_\text{model} \cdot \text{warmup})^{-0.5}$, reached at the
#    end of the warm-up, and compute it for the paper's settings.
# 2. Derive the logit margin where the label-smoothed loss is lowest, for $\epsilon = 0.1$ and a
#    vocabulary of 1,000, and compare it with the printed one.
# 3. Decode the first 100 test sentences with `method="beam", beam_size=1` and compare with
#    greedy decoding. What do you expect, and why?
#
# ## Papers
#
# * Vaswani et al. (2017). [Attention Is All You Need (section 5)](https://arxiv.org/abs/1706.03762).
# * Szegedy et al. (2016). [Rethinking the Inception Architecture for Computer Vision (label smoothing)](https://arxiv.org/abs/1512.00567).
# * Wu et al. (2016). [Google's Neural Machine Translation System (length penalty, section 7)](https://arxiv.org/abs/1609.08144).
# * Press and Wolf (2017). [Using the Output Embedding to Improve Language Models](https://arxiv.org/abs/1608.05859).
#
# ## Solutions
#
# <details><summary>1. The peak</summary>
#
# At step = warmup both terms equal $\text{warmup}^{-0.5}$, so the rate is
# $d_\text{model}^{-0.5}\,\text{warmup}^{-0.5}$. For 512 and 4,000:
# $(2{,}048{,}000)^{-0.5} \approx 7.0 \times 10^{-4}$, the printed peak.
# </details>
#
# <details><summary>2. The best margin</summary>
#
# The smoothed target puts $1 - \epsilon + \epsilon/V$ on the right word and $\epsilon/V$ on each
# other word. The loss is lowest when the model's probabilities equal the target's, so
# $e^m = (1 - \epsilon + \epsilon/V)\,V/\epsilon$, $m = \ln 9001 \approx 9.1$. The printed minimum is the
# nearest point of the grid of margins (steps of 0.25).
# </details>
#
# <details><summary>3. A beam of one</summary>
#
# ```python
# greedy = evaluate_bleu(translator, test_pairs[:100])
# beam_1 = evaluate_bleu(translator, test_pairs[:100], method="beam", beam_size=1)
# print(greedy["hypotheses"] == beam_1["hypotheses"])
# ```
# The same translations: with one hypothesis, each step keeps the best extension of the only
# candidate, which is greedy decoding, and the length penalty cannot reorder a single
# hypothesis.
# </details>
