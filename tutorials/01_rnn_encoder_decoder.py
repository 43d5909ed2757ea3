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
# # 01 · The RNN encoder-decoder and its fixed-vector bottleneck
#
# This is the first step of a path from recurrent translation models to the
# Transformer. Each step is a script you can run (`python tutorials/01_rnn_encoder_decoder.py`)
# and a notebook. `QUICK=1` shrinks the data and the training so that it runs in
# seconds; the first code cell prints which mode produced the outputs you are reading.
#
# Here we translate English to German with the model that attention was invented to
# fix: an encoder RNN that reads the whole source sentence into one vector, and a
# decoder RNN that writes the translation from that vector alone
# (Sutskever, Vinyals and Le, 2014; Cho et al., 2014). At the end we measure BLEU
# separately for short and long sentences.

# %% [markdown]
# **What you will learn**
#
# * how an encoder-decoder turns a sentence into one vector and a vector back into a sentence;
# * what WordPiece sub-word tokens are, and how teacher-forcing batches are laid out;
# * how greedy decoding works, and how BLEU scores a translation;
# * where the fixed-vector design is weak, measured by sentence length.
#
# **What you need**: Python, NumPy and the basics of Keras (layers, `compile`, `fit`). No earlier
# tutorial. The first code cell prints which mode (QUICK or full) produced the outputs shown.

# %%
import time

import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import SETTINGS, figure_path
from keras_attention import Translator, data, evaluate_bleu, models, training

_common.start("01 The RNN encoder-decoder")

# %% [markdown]
# ## A recurrent net is one layer used many times
#
# An RNN applies the same cell at every position, carrying a state forward:
# $h_t = f(h_{t-1}, x_t)$. Unrolled over a sentence of $T$ words it is a $T$-layer
# network whose layers share their weights. That depth is what makes long-range
# dependencies hard to learn: the error signal linking word 1 to word 30 must pass
# through 29 applications of the cell. Gated cells (LSTM, GRU) keep the gradient
# alive much better, but they do not change what the encoder-decoder below must
# do with the state.
#
# ## Encoder, summary vector, decoder
#
# The sequence-to-sequence model splits translation into two functions:
#
# * the **encoder** reads the source $x_1 \dots x_S$ and returns a vector
#   $c = f_\text{enc}(x)$;
# * the **decoder** is a language model of the target conditioned on $c$:
#   $p(y_t \mid y_{<t}, c)$, with its own state
#   $s_t = g(s_{t-1}, [y_{t-1}; c])$.
#
# Whatever the length of the source, everything the decoder learns about it has
# to pass through the fixed-size $c$. Bahdanau, Cho and Bengio (2014) call this
# the bottleneck, and showed that such models degrade as sentences get longer.
#
# ## The data: Multi30k
#
# Multi30k (Elliott et al., 2016) holds 29,000 English image descriptions with
# German translations for training and 1,000 for testing (`test_2016_flickr`).
# The sentences are short (half of the test sources have 11 words or fewer),
# which lets a CPU train something useful in minutes.

# %%
train_pairs = data.load_multi30k("en", "de", split="train")
if SETTINGS.train_pairs:
    train_pairs = train_pairs.take(SETTINGS.train_pairs)
for english, german in train_pairs.take(3).as_numpy_iterator():
    print(f"{english.decode()}\n  -> {german.decode()}")
print("training pairs used:", sum(1 for _ in train_pairs))

# %% [markdown]
# ## Sub-word tokens
#
# A word-level vocabulary either grows huge or leaves many words unknown. WordPiece
# (Wu et al., 2016) keeps frequent words whole and cuts rare ones into pieces;
# a piece that continues a word starts with `##`. One tokenizer per language, each
# learned from the training side of its language.

# %%
en_tokenizer = data.SubwordTokenizer.from_dataset(
    train_pairs.map(lambda en, de: en), vocab_size=SETTINGS.vocab_size
)
de_tokenizer = data.SubwordTokenizer.from_dataset(
    train_pairs.map(lambda en, de: de), vocab_size=SETTINGS.vocab_size
)
print("vocabulary sizes: en", en_tokenizer.vocab_size, "de", de_tokenizer.vocab_size)
example = "A little girl climbs into a wooden playhouse."
ids = en_tokenizer.tokenize([example])[0].numpy()
print("pieces:", [en_tokenizer.vocabulary[i] for i in ids])
print("ids:   ", ids.tolist())
print("back:  ", en_tokenizer.detokenize([ids]).numpy()[0].decode())

# %% [markdown]
# ## Batches for teacher forcing
#
# During training the decoder is fed the *reference* prefix, not its own guesses
# (teacher forcing): the input is `[START] y_1 ... y_n` and the expected output is
# `y_1 ... y_n [END]`, the same sequence shifted by one. `make_translation_dataset`
# builds `((source_ids, target_in), target_out)` batches, groups sentences of
# similar length so that little padding (id 0) is wasted, and drops the rare pairs
# longer than `max_length` tokens.

# %%
batches = data.make_translation_dataset(
    train_pairs,
    en_tokenizer,
    de_tokenizer,
    batch_size=SETTINGS.batch_size,
    max_length=SETTINGS.max_length,
    bucket_boundaries="auto",
    shuffle=True,
    seed=0,
)
(source_ids, target_in), target_out = next(iter(batches))
print("source_ids:", tuple(source_ids.shape), " target_in:", tuple(target_in.shape),
      " target_out:", tuple(target_out.shape))
print("target_in[0][:6]: ", target_in[0, :6].numpy().tolist())
print("target_out[0][:6]:", target_out[0, :6].numpy().tolist())

# %% [markdown]
# `_common.load_translation_data()` repeats exactly these three steps; the following
# tutorials call it instead of spelling them out again.
#
# ## The model
#
# `models.Seq2SeqRNN(attention=None)` is the fixed-vector model: a bidirectional GRU
# encoder, a dense `tanh` "bridge" from its two final states to the decoder's first
# state, and a GRU decoder that receives the same summary $c$ (the bridge output)
# next to the previous word at every step, as in Cho et al. (2014). Calling it once on
# a batch creates its weights.

# %%
model = models.Seq2SeqRNN(en_tokenizer.vocab_size, de_tokenizer.vocab_size, attention=None, **SETTINGS.rnn)
logits = model((source_ids, target_in))
print("logits:", tuple(logits.shape), "= (batch, target length, German vocabulary)")
print(f"parameters: {model.count_params():,}")

# %% [markdown]
# ## Where the bottleneck is, in shapes
#
# `encode` runs the encoder. It returns one annotation per source position (which
# this model ignores after the bridge) and the summary $c$: one vector of `units`
# numbers per sentence, whatever the sentence's length.

# %%
for length in (5, 25):
    ids = keras.ops.ones((2, length), "int32")
    carry, constants = model.encode(ids)
    print(f"source length {length:2d}: encoder states {tuple(constants['encoder_output'].shape)}"
          f" -> summary c {tuple(constants['summary'].shape)}")

# %% [markdown]
# ## Training with `fit`
#
# Each position of `target_out` is a classification over the German vocabulary, so the
# loss is the cross-entropy of every target token, averaged over the real tokens only:
# `training.MaskedSparseCrossEntropy` leaves out the padding (id 0). Its label smoothing
# of 0.1 is written out below; tutorial 10 shows what it does to the logits. The metric, `training.MaskedTokenAccuracy`, is the
# share of real tokens predicted right. Adam runs at a rate of $10^{-3}$ with the
# Transformer paper's $\beta_2 = 0.98$, and gradients are clipped to norm 1, because a
# recurrence can produce exploding gradients. `jit_compile=False` keeps XLA off: it would
# compile the model again for every new batch shape, longer than this short run gains.
#
# `fit` gets the batches repeated without end and `steps_per_epoch` set to one pass, so
# each epoch is still one whole pass, shuffled anew, and the whole run reads the data
# through one iterator. Counting the batches takes one pass, which also fills the
# dataset's cache of token ids.

# %%
model.compile(
    optimizer=keras.optimizers.Adam(1e-3, beta_1=0.9, beta_2=0.98, epsilon=1e-9, clipnorm=1.0),
    loss=training.MaskedSparseCrossEntropy(label_smoothing=0.1),
    metrics=[training.MaskedTokenAccuracy()],
    jit_compile=False,
)
steps_per_epoch = sum(1 for _ in batches)
started = time.time()
history = model.fit(batches.repeat(), steps_per_epoch=steps_per_epoch, epochs=SETTINGS.rnn_epochs, verbose=2)
seconds = time.time() - started
print(f"{SETTINGS.rnn_epochs} epoch(s) in {seconds:.0f} s on {_common.device_name()}")
print("training loss by epoch:", [round(x, 3) for x in history.history["loss"]],
      " token accuracy:", [round(x, 3) for x in history.history["token_accuracy"]])

# %% [markdown]
# ### The loss and the accuracy, by hand
#
# Both fit in a few lines of NumPy. With the logits $z$ of one target position,
# $p = \mathrm{softmax}(z)$ over the $V$ German words, the true next word $y$ and the
# smoothing $\epsilon = 0.1$, the target is $1 - \epsilon$ on $y$ plus $\epsilon$ spread
# evenly over all $V$ words, and the position's loss is the cross-entropy against it:
#
# $$\ell = -(1 - \epsilon) \log p_y - \frac{\epsilon}{V} \sum_{k=1}^{V} \log p_k.$$
#
# The batch's loss is the mean of $\ell$ over the real target tokens (padding, id 0, is
# left out), and the accuracy is the share of real tokens whose most probable word is
# $y$. Below, both on the first batch with the trained model, beside the library's. They
# are one batch's figures, of sentences of similar length and with dropout off, not the
# averages over an epoch that `fit` printed above.

# %%
batch_logits = keras.ops.convert_to_numpy(model((source_ids, target_in), training=False))  # (B, T, V)
next_words = keras.ops.convert_to_numpy(target_out)  # (B, T): the true next word at each position
real = next_words != 0  # (B, T): False on padding
shifted = batch_logits - batch_logits.max(axis=-1, keepdims=True)
log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # log-softmax, (B, T, V)
eps = 0.1
log_p_true = np.take_along_axis(log_p, next_words[..., None], axis=-1)[..., 0]  # (B, T)
per_token = -(1 - eps) * log_p_true - eps * log_p.mean(axis=-1)  # (B, T): the mean over V is the sum / V
library_loss = training.MaskedSparseCrossEntropy(label_smoothing=eps)(target_out, batch_logits)
accuracy = training.MaskedTokenAccuracy()
accuracy.update_state(target_out, batch_logits)
print(f"loss:     by hand {per_token[real].mean():.5f}, training.MaskedSparseCrossEntropy {float(library_loss):.5f}")
print(f"accuracy: by hand {(batch_logits.argmax(axis=-1) == next_words)[real].mean():.5f}, "
      f"training.MaskedTokenAccuracy {float(accuracy.result()):.5f}")

# %% [markdown]
# ## Translating, one word at a time
#
# Now there is no reference to feed. `init_decoding_state` runs the encoder once;
# `decode_step` takes the previous output word of each sentence and returns the scores of
# the next one, carrying the decoder's state from step to step. Greedy decoding takes the
# most probable word, feeds it back, and stops at `[END]`. `[PAD]` (id 0) is never a
# word, so its score is masked out. The source gets the `[START]` and `[END]` markers it
# had in training.

# %%
test_pairs = data.load_multi30k("en", "de", split="test").take(SETTINGS.test_pairs)
test_pairs = [(en.decode(), de.decode()) for en, de in test_pairs.as_numpy_iterator()]


def greedy_translate(sentence, max_length=SETTINGS.max_length):
    pieces = en_tokenizer.tokenize([sentence])[0].numpy().tolist()
    source = np.array([[en_tokenizer.start_id, *pieces, en_tokenizer.end_id]], "int32")  # (1, S)
    state = model.init_decoding_state(source, max_length)
    token, output = np.array([de_tokenizer.start_id], "int32"), []
    for step in range(max_length):
        logits, state, _ = model.decode_step(state, token, step)  # logits: (1, German vocabulary)
        logits = np.array(logits)
        logits[:, 0] = -np.inf  # never [PAD]
        token = logits.argmax(axis=-1).astype("int32")  # (1,)
        if token[0] == de_tokenizer.end_id:
            break
        output.append(int(token[0]))
    return de_tokenizer.detokenize([output]).numpy()[0].decode()


for en, de in test_pairs[:3]:
    print(f"source:    {en}\nreference: {de}\noutput:    {greedy_translate(en)}\n")

# %% [markdown]
# `Translator` wraps the same steps: it tokenizes a batch, runs this loop for all its
# sentences at once inside one compiled TensorFlow function, and detokenizes. It gives
# the same translations, and it is the object the later tutorials use (and the library
# can save, export and serve). The last line keeps the trained translator in the
# tutorials' cache, so that tutorials 02, 03 and 10 compare against this very model.

# %%
translator = Translator(model, en_tokenizer, de_tokenizer, max_source_length=128,
                        max_target_length=SETTINGS.max_length)
sources = [en for en, _ in test_pairs[:20]]
same = sum(a == b for a, b in zip(translator(sources), map(greedy_translate, sources)))
print(f"Translator and the loop above agree on {same} of {len(sources)} sentences")
assert same == len(sources), "the prose above says the two give the same translations"
_common.keep_translator("rnn", translator, dict(history.history, train_seconds=round(seconds, 1)))

# %% [markdown]
# ## BLEU, by hand
#
# BLEU (Papineni et al., 2002) scores a whole test set at once. Both sides are split
# into words (sacreBLEU's standard `13a` tokenizer: punctuation split off). For each
# $n$ from 1 to 4, $p_n$ is the share of the output's $n$-grams that also occur in the
# reference, each counted at most as often as the reference has it ("clipped"), with
# the counts summed over all sentences before dividing. Short output is penalised by
# the brevity penalty $BP = \min(1, e^{1 - r/c})$, with $c$ and $r$ the total numbers of
# output and reference words. Then
#
# $$\text{BLEU} = 100 \cdot BP \cdot \exp\Big(\tfrac{1}{4} \sum_{n=1}^{4} \log p_n\Big).$$
#
# Below, on the first 100 test sentences, beside sacreBLEU (without its smoothing of
# zero counts, which this formula does not have).

# %%
import collections
import math

import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a


def ngram_counts(words, n):
    return collections.Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


hypotheses = translator([en for en, _ in test_pairs[:100]])
references = [de for _, de in test_pairs[:100]]
tokenize_13a = Tokenizer13a()  # a string in, the same string with punctuation split off
matches, totals, c, r = [0] * 4, [0] * 4, 0, 0  # c, r: output and reference words in all
for hypothesis, reference in zip(hypotheses, references):
    output_words, reference_words = tokenize_13a(hypothesis).split(), tokenize_13a(reference).split()
    c, r = c + len(output_words), r + len(reference_words)
    for n in range(1, 5):
        in_reference = ngram_counts(reference_words, n)
        matches[n - 1] += sum(min(count, in_reference[g]) for g, count in ngram_counts(output_words, n).items())
        totals[n - 1] += max(len(output_words) - n + 1, 0)
precisions = [m / t if t else 0.0 for m, t in zip(matches, totals)]
brevity = min(1.0, math.exp(1 - r / max(c, 1)))
by_hand = 100 * brevity * math.exp(sum(map(math.log, precisions)) / 4) if min(precisions) > 0 else 0.0
library = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="13a", smooth_method="none").score
print("p_1..p_4:", [round(p, 3) for p in precisions], f" BP {brevity:.3f} (c={c}, r={r})")
print(f"BLEU by hand {by_hand:.4f}, sacreBLEU {library:.4f}")

# %% [markdown]
# ## BLEU by source length
#
# `evaluate_bleu` translates a list of pairs and scores them with sacreBLEU as above
# (with sacreBLEU's default smoothing, which only matters when an $n$-gram count is zero);
# it gives cased BLEU, which these tutorials report, and lower-cased BLEU, which most
# Multi30k papers report. We split
# the test set by the number of English words and score each part separately.

# %%
rows = _common.bleu_by_length(translator, test_pairs)
print(f"{'words':>6} {'sentences':>9} {'BLEU':>6} {'BLEU (lower)':>12}")
for label, count, cased, lower in rows:
    print(f"{label:>6} {count:9d} {cased:6.2f} {lower:12.2f}")

labels = [r[0] for r in rows]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(labels, [r[2] for r in rows], color="tab:gray")
ax.set_xlabel("English sentence length (words)")
ax.set_ylabel("BLEU")
ax.set_title("Fixed-vector encoder-decoder on Multi30k test")
fig.tight_layout()
fig.savefig(figure_path("01_bleu_by_length.png"), dpi=100)
short, long = rows[0][2], rows[-1][2]
change = (long - short) / short if short > 0 else float("nan")  # (a QUICK run may score 0)
print(f"shortest bucket {short:.2f} BLEU, longest {long:.2f}: a relative change of {change:+.1%}")
overall = evaluate_bleu(translator, test_pairs)
_common.result(f"BLEU {overall['bleu']:.1f} (greedy, {len(test_pairs)} test sentences)")

# %% [markdown]
# The line before the result compares the shortest and the longest bucket of this run:
# the change from one to the other, relative to the shortest. Two epochs leave this model
# weak, and length alone makes translation harder for any model, so this number is only
# half of the argument. Tutorial 02 trains the same network with attention, on the same
# data for the same number of epochs, and computes the same change for both.
#
# Full mode trains on all 29,000 pairs for two epochs (the training cell prints how long
# that took). Training longer would raise the bars; it would not remove the single
# vector between the encoder and the decoder.

# %% [markdown]
# ## Recap
#
# * The encoder reads the whole source into a summary $c$ whose size does not depend on the
#   sentence's length (the shapes printed under "Where the bottleneck is").
# * WordPiece keeps frequent words whole and splits rare ones into `##` pieces; each language
#   has its own tokenizer here.
# * Teacher forcing: the decoder reads `[START] y` and is trained to predict `y [END]`.
# * The loss is the cross-entropy against a smoothed target, averaged over the real tokens;
#   the accuracy counts the real tokens whose most probable word is right.
# * Greedy decoding feeds back the most probable word until it writes `[END]`.
# * BLEU multiplies the geometric mean of clipped 1- to 4-gram precisions, counted over the
#   whole test set, by a penalty for short output.
# * BLEU by source length is one half of the argument about the bottleneck; tutorial 02 trains
#   the same network with attention and gives the other half.
#
# ## Exercises
#
# 1. Tokenize a sentence with rare words of your own, for example
#    "A skateboarder grinds down a metal handrail." Which words come back whole and which
#    in pieces? *Hint:* the cell under "Sub-word tokens" does this for one sentence.
# 2. Check that the summary has the same size for a source of 60 tokens as for one of 5.
#    *Hint:* `model.encode(keras.ops.ones((1, 60), "int32"))`.
# 3. Tokenize the same sentence with a vocabulary of 500 pieces. What happens to the
#    number of pieces, and why does that matter for the decoder? *Hint:*
#    `data.SubwordTokenizer.from_dataset(..., vocab_size=500)`.
#
# ## Papers
#
# * Sutskever, Vinyals and Le (2014). [Sequence to Sequence Learning with Neural Networks](https://arxiv.org/abs/1409.3215).
# * Cho et al. (2014). [Learning Phrase Representations using RNN Encoder-Decoder for Statistical Machine Translation](https://arxiv.org/abs/1406.1078).
# * Elliott et al. (2016). [Multi30K: Multilingual English-German Image Descriptions](https://arxiv.org/abs/1605.00459).
# * Wu et al. (2016). [Google's Neural Machine Translation System (WordPiece, section 4)](https://arxiv.org/abs/1609.08144).
# * Papineni et al. (2002). [BLEU: a Method for Automatic Evaluation of Machine Translation](https://aclanthology.org/P02-1040/).
#
# ## Solutions
#
# <details><summary>1. Rare words in pieces</summary>
#
# ```python
# ids = en_tokenizer.tokenize(["A skateboarder grinds down a metal handrail."])[0].numpy()
# print([en_tokenizer.vocabulary[i] for i in ids])
# ```
# Which words are split depends on the vocabulary learned from the training side: words
# that are frequent in Multi30k ("a", "down", "metal") come back whole, rarer ones come back
# as a first piece followed by `##` pieces. `detokenize` glues the pieces back together.
# </details>
#
# <details><summary>2. One vector, whatever the length</summary>
#
# ```python
# shapes = {}
# for length in (5, 60):
#     _, constants = model.encode(keras.ops.ones((1, length), "int32"))
#     shapes[length] = tuple(constants["summary"].shape)
#     print(length, shapes[length])
# assert shapes[5] == shapes[60]
# ```
# Both print `(1, units)`: the encoder states grow with the source, the summary does not.
# </details>
#
# <details><summary>3. A smaller vocabulary</summary>
#
# ```python
# small = data.SubwordTokenizer.from_dataset(train_pairs.map(lambda en, de: en), vocab_size=500)
# print([small.vocabulary[i] for i in small.tokenize([example])[0].numpy()])
# ```
# With fewer pieces more words are split, so sentences become longer sequences. The
# decoder then has more steps to get right, and (in this model) everything it needs must
# still pass through the same fixed-size summary.
# </details>
