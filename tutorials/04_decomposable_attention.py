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
# # 04 · Decomposable attention: comparing two sentences without any RNN
#
# Attention was introduced to help RNNs, but Parikh, Täckström, Das and Uszkoreit
# (2016, "A Decomposable Attention Model for Natural Language Inference") showed that
# for deciding how two sentences relate, attention plus small feed-forward networks is
# enough: no recurrence and no word order at all. On the SNLI inference benchmark it
# reached 86.3% test accuracy with 382,000 trained parameters, where the LSTM models of
# about the same accuracy in its Table 1 had 1.9 to 3.4 million (its word vectors,
# pretrained GloVe kept fixed, are not counted). It is a stepping stone between the RNN
# models of tutorials 01-03 and the Transformer.
#
# We train it on a task made from Multi30k: **is the German sentence B the translation of
# the English sentence A?** The first code cell prints which mode produced the outputs.

# %% [markdown]
# **What you will learn**
#
# * the attend, compare, aggregate model of Parikh et al., with no recurrence;
# * how to build a sentence-pair task with hard negatives from a translation corpus;
# * how the scale of the initial word vectors decides whether the model learns to align
#   words, when scores are products of two learned vectors;
# * how to measure an alignment nobody labelled, and why the model is a bag of words.
#
# **What you need**: tutorial 02 (soft alignments).

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np

import _common
from _common import QUICK, figure_path
from keras_attention import data, models
from keras_attention.explain.plotting import plot_attention

_common.start("04 Decomposable attention")

# %% [markdown]
# ## The three steps (section 3)
#
# Sentence $a$ has words $a_1 \dots a_{\ell_a}$ and sentence $b$ has words
# $b_1 \dots b_{\ell_b}$, each an embedding vector projected linearly to `hidden_dim`
# features. In the paper's inference terms $a$ is the *premise* and $b$ the *hypothesis*;
# here the premise is English and the hypothesis German.
#
# 1. **Attend.** Score every pair with a shared feed-forward net $F$:
#    $e_{ij} = F(a_i)^\top F(b_j)$. Normalise over $j$ to get $\beta_i$, the part of $b$
#    that aligns with word $a_i$, and over $i$ to get $\alpha_j$, the part of $a$ that
#    aligns with $b_j$. This is the soft alignment of tutorial 02, in both directions.
# 2. **Compare.** For every word, a second net $G$ compares it with what it was aligned
#    to: $v_{1,i} = G([a_i; \beta_i])$, $v_{2,j} = G([b_j; \alpha_j])$.
# 3. **Aggregate.** Sum the comparisons of each sentence, $v_1 = \sum_i v_{1,i}$,
#    $v_2 = \sum_j v_{2,j}$, and classify $[v_1; v_2]$ with a third net $H$.
#
# Each word is processed independently in steps 1 and 2 (the model "decomposes" into
# per-word work that parallelises trivially); only the attention and the sums bring
# words together.
#
# ## A translation-matching task with hard negatives
#
# Positive pairs are Multi30k English sentences with their German translations. A
# random German sentence would be too easy a negative (it is about something else
# entirely), so each negative pairs an English sentence with the translation of a
# *similar* English sentence: the most similar of 100 random candidates by word overlap
# (the Jaccard index of their word sets). Among 100 candidates the best is often only
# loosely similar, as the examples printed below show; where it is close ("A man in a
# blue shirt is climbing" against the German for "A man in a red shirt is running") the
# pair can only be rejected by matching individual words. Both
# languages share one WordPiece vocabulary, because the model has a single embedding.

# %%
pair_count = 512 if QUICK else 29000  # English-German pairs; each gives a positive and a negative
epochs = 1 if QUICK else 5
max_pieces = 32  # longer sentences (few) are left out, so every batch has the same shape
rng = np.random.default_rng(0)


def load_pairs(split, count):
    pairs = data.load_multi30k("en", "de", split=split).take(count)
    return [(en.decode(), de.decode()) for en, de in pairs.as_numpy_iterator()]


def with_negatives(pairs, hard=True, candidates=100):
    """Each pair once as a positive (label 1) and once with a negative German side (label 0)."""
    words = [set(en.lower().split()) for en, _ in pairs]
    examples = []
    for i, (en, de) in enumerate(pairs):
        pool = rng.choice(len(pairs), size=candidates, replace=False)
        pool = [j for j in pool if j != i]
        if hard:  # the most similar English sentence (Jaccard overlap of word sets)
            j = max(pool, key=lambda j: len(words[i] & words[j]) / len(words[i] | words[j]))
        else:
            j = pool[0]
        examples += [(en, de, 1), (en, pairs[j][1], 0)]
    return examples


train = with_negatives(load_pairs("train", pair_count))
valid_pairs = load_pairs("val", 200 if QUICK else 1014)
valid_hard, valid_random = with_negatives(valid_pairs, hard=True), with_negatives(valid_pairs, hard=False)
for en, de, label in train[:4]:
    print(f"[{'match' if label else 'no match'}] {en}\n           {de}")

# %% [markdown]
# The tokenizer turns each side into WordPiece ids. Every example becomes two rows of
# `max_pieces` ids, 0-padded; the few examples with a longer side are dropped.

# %%
texts = [en for en, _, _ in train[::2]] + [de for _, de, _ in train[::2]]  # the positives: each pair once
tokenizer = data.SubwordTokenizer.from_dataset(texts, vocab_size=1000 if QUICK else 6000)
print("shared vocabulary:", tokenizer.vocab_size, "pieces")


def encode(examples):
    """(English, German, label) triples -> ((premise, hypothesis), labels), both sides (N, max_pieces)."""
    premise = tokenizer.tokenize([en for en, _, _ in examples])  # ragged (N, None)
    hypothesis = tokenizer.tokenize([de for _, de, _ in examples])
    fits = ((premise.row_lengths() <= max_pieces) & (hypothesis.row_lengths() <= max_pieces)).numpy()
    width = [len(examples), max_pieces]
    # to_tensor pads every row with 0 to max_pieces (and would cut a longer row): those examples are dropped.
    premise = premise.to_tensor(shape=width).numpy()[fits]  # (N', max_pieces)
    hypothesis = hypothesis.to_tensor(shape=width).numpy()[fits]
    labels = np.array([label for _, _, label in examples])[fits]
    return (premise, hypothesis), labels


(train_a, train_b), train_labels = encode(train)
(valid_a, valid_b), valid_labels = encode(valid_hard)
print("premises:", train_a.shape, " hypotheses:", train_b.shape, " labels:", train_labels.shape,
      f" ({train_labels.mean():.0%} positive, {len(train) - len(train_labels)} of {len(train)} examples dropped)")

# %% [markdown]
# ## The model, and a question about its initial word vectors
#
# `models.DecomposableAttention(vocab_size, num_classes=2)`; id 0 is padding and is
# left out of the attention and of the sums. It returns two logits (no match, match).
#
# The alignment scores are products of two learned vectors, $F(a_i)^\top F(b_j)$. Keras
# starts embeddings small (uniform in ±0.05), so at first every score is close to zero
# and every softmax close to uniform: each word is compared with the *average* of the
# other sentence. The paper started from pretrained GloVe vectors (scaled to length 1
# and kept fixed), in which related words already have similar vectors; ours start
# random. Does their scale matter? We train the model twice, with Keras' default start and
# with word vectors drawn from a normal distribution of standard deviation 1, and after
# every epoch measure the accuracy on the validation pairs (hard negatives) it never
# trains on.

# %%
def train_model(embedding_std=None):
    start = "uniform" if embedding_std is None else keras.initializers.RandomNormal(stddev=embedding_std, seed=1)
    model = models.DecomposableAttention(tokenizer.vocab_size, num_classes=2, embedding_dim=100, hidden_dim=100,
                                         dropout=0.0, embeddings_initializer=start)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit((train_a, train_b), train_labels, batch_size=128, epochs=epochs, shuffle=True,
                        validation_data=((valid_a, valid_b), valid_labels), verbose=2)
    return model, history.history


default_start, default_history = train_model()
model, history = train_model(embedding_std=1.0)
print("logits:", tuple(model((train_a[:3], train_b[:3])).shape), " (3 pairs, no match/match)")

# %% [markdown]
# How big is it? The paper's 382,000 parameters exclude the fixed word vectors; here the
# word vectors are trained, and $F$, $G$, $H$ are half as wide (100 against the paper's
# 200).

# %%
parts = {"word vectors": model.embedding, "projection": model.projection, "F (attend)": model.attend_feedforward,
         "G (compare)": model.compare_feedforward, "H (aggregate)": model.aggregate_feedforward,
         "classifier": model.classifier}
for name, part in parts.items():
    print(f"{name:14s} {part.count_params():>9,}")
print(f"{'total':14s} {model.count_params():>9,}  (without the word vectors: "
      f"{model.count_params() - model.embedding.count_params():,})")

# %% [markdown]
# ## What the start changed
#
# The figure shows both accuracies after each epoch: on the training pairs (dashed, the
# running mean over the epoch, as `fit` reports it) and on the validation pairs (solid).
# Below it, the accuracy on validation pairs with random negatives as well, and how
# peaked the alignments are: the mean, over English pieces, of the largest weight in their
# row; uniform weights would give one over the German length.

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.2))
for (name, run), colour in zip((("default start", default_history), ("std-1 start", history)), ("C0", "C1")):
    ax.plot(np.arange(1, epochs + 1), run["accuracy"], "o--", color=colour, label=f"{name}, training")
    ax.plot(np.arange(1, epochs + 1), run["val_accuracy"], "o-", color=colour, label=f"{name}, validation")
ax.set_xlabel("epoch")
ax.set_ylabel("accuracy")
ax.set_xticks(np.arange(1, epochs + 1))
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(figure_path("04_training.png"), dpi=100)
plt.show()

matches = valid_labels == 1  # the true translations
uniform = 1 / np.mean(np.sum(valid_b[matches] != 0, axis=1))
(random_a, random_b), random_labels = encode(valid_random)
summary = {}
for name, trained, run in (("default start", default_start, default_history), ("std-1 start", model, history)):
    weights = trained.alignments((valid_a[matches], valid_b[matches]))[0].numpy()  # (N, English, German)
    summary[name] = dict(
        training=run["accuracy"][-1], validation=run["val_accuracy"][-1],
        random=trained.evaluate((random_a, random_b), random_labels, verbose=0)[1],
        peak=weights.max(-1)[valid_a[matches] != 0].mean(),  # each English piece's largest weight, padding left out
    )
print(f"{'':13s} {'training':>9s} {'validation':>11s} {'gap':>6s} {'random negatives':>17s} {'largest weight':>15s}")
for name, s in summary.items():
    print(f"{name:13s} {s['training']:9.3f} {s['validation']:11.3f} {s['training'] - s['validation']:6.3f} "
          f"{s['random']:17.3f} {s['peak']:15.2f}")
print(f"(uniform alignment weights would be about {uniform:.2f}; guessing scores 0.5)")
default, larger = summary["default start"], summary["std-1 start"]
if not QUICK:  # what the next paragraph says, as checks on this run's numbers
    assert all(d > s for d, s in zip(default_history["accuracy"], history["accuracy"]))
    assert np.argmax(default_history["val_accuracy"]) < epochs - 1
    assert default["validation"] < larger["validation"] and default["random"] < larger["random"]
    assert default["training"] - default["validation"] > larger["training"] - larger["validation"]
    assert default["peak"] < 2 * uniform < larger["peak"]
_common.result(f"accuracy {summary['std-1 start']['validation']:.1%} (hard negatives, std-1 start)")
# %% [markdown]
# With Keras' default start the model fits the training pairs faster (the dashed lines:
# ahead at every epoch) but ends worse on the validation pairs, with either kind of
# negative: its validation accuracy peaks before the last epoch while its training
# accuracy keeps rising, and the gap between the two is the larger one. Its alignments
# are nearly flat (compare the largest weight with the uniform value printed under the
# table): each word is compared with little more than the *average* of the other
# sentence, so what the model can learn is mostly which words occur together in the
# training pairs, and that carries over less well to sentences it has not seen. With
# the std-1 start the scores differ from the first step, the alignments are peaked, and
# step 2 compares a word with the words it is aligned to; that generalises better.
#
# ## Did it learn which words translate which?
#
# Nobody told the model which German word translates which English word. To check
# whether its alignment found them anyway, take a small dictionary of common nouns
# whose translations are single pieces of the vocabulary. For every validation
# translation holding such a pair, ask whether the English word's row of
# `to_hypothesis` puts its largest weight on the German word. Guessing a German
# piece at random would hit it with a probability of (its count) / (the German length).

# %%
dictionary = {
    "man": "Mann", "men": "Männer", "woman": "Frau", "women": "Frauen", "boy": "Junge", "girl": "Mädchen",
    "child": "Kind", "children": "Kinder", "people": "Menschen", "dog": "Hund", "dogs": "Hunde",
    "street": "Straße", "water": "Wasser", "ball": "Ball", "hat": "Hut", "beach": "Strand", "snow": "Schnee",
    "grass": "Gras", "bike": "Fahrrad", "car": "Auto", "table": "Tisch", "guitar": "Gitarre", "group": "Gruppe",
    "building": "Gebäude", "shirt": "Hemd", "jacket": "Jacke", "hair": "Haare", "field": "Feld",
}
ids = {piece: i for i, piece in enumerate(tokenizer.vocabulary)}
pairs_by_id = {ids[en]: ids[de] for en, de in dictionary.items() if en in ids and de in ids}
print(f"{len(pairs_by_id)} of {len(dictionary)} dictionary pairs are single pieces on both sides")


def dictionary_hits(trained, a, b):
    """How often an English dictionary word's strongest German piece is its translation, and chance."""
    weights = trained.alignments((a, b))[0].numpy()  # (N, English pieces, German pieces); each row sums to 1
    hits = chance = count = 0
    for row_ids, column_ids, rows in zip(a, b, weights):
        length = np.sum(column_ids != 0)
        for i, piece in enumerate(row_ids):
            german = pairs_by_id.get(int(piece))
            if german is not None and german in column_ids:
                hits += column_ids[rows[i].argmax()] == german
                chance += np.sum(column_ids == german) / length
                count += 1
    return hits, chance, count


found = {}
for name, trained in (("default start", default_start), ("std-1 start", model)):
    hits, chance, count = dictionary_hits(trained, valid_a[matches], valid_b[matches])
    found[name], found["chance"] = hits / count, chance / count
    print(f"{name:13s}: {hits} of {count} dictionary words attend most to their translation "
          f"({hits / count:.0%}; chance {chance / count:.0%})")
if not QUICK:  # what the next paragraph says, as checks on this run's numbers
    assert found["std-1 start"] > max(0.5, 4 * found["chance"]) and found["default start"] < found["chance"]

# %% [markdown]
# With the std-1 start most of these words attend most to their translation, several
# times what chance gives: the alignment found translations by itself, because matching
# a word with its translation is what tells a translation from a hard negative. The
# default start's nearly flat rows put their small peak on the translation even less
# often than a random pick would: whatever that model uses to decide, it is not these
# alignments. Neither model was asked to align, and the alignment only has to be good
# enough for the match decision, which is a weaker requirement than translating.
#
# One pair in full: the first validation translation in which dictionary words occur at
# least twice, with its alignment (rows: English pieces; columns: German pieces) and each English
# piece's strongest German piece.

# %%
def dictionary_words(a, b):
    return [i for i in a if i in pairs_by_id and pairs_by_id[i] in b]


for en, de in valid_pairs:
    (a, b), _ = encode([(en, de, 1)])
    if len(a) and len(dictionary_words(a[0], b[0])) >= 2:
        break
print(f"{en}\n{de}")
print(f"probability of a match: {keras.ops.softmax(model((a, b))).numpy()[0, 1]:.3f}")
to_hypothesis, to_premise = model.alignments((a, b))
print("to_hypothesis:", tuple(to_hypothesis.shape), " to_premise:", tuple(to_premise.shape),
      " (batch, English pieces, German pieces)")
en_pieces = [tokenizer.vocabulary[i] for i in a[0] if i]
de_pieces = [tokenizer.vocabulary[i] for i in b[0] if i]
figure = plot_attention(to_hypothesis[0], de_pieces, en_pieces, path=figure_path("04_alignment.png"),
                        title="English pieces attending to German pieces", source_label="German",
                        target_label="English")
for i, row in zip(a[0][a[0] != 0], to_hypothesis.numpy()[0]):
    expected = f"   (dictionary: {tokenizer.vocabulary[pairs_by_id[i]]})" if i in pairs_by_id else ""
    print(f"{tokenizer.vocabulary[i]:12s} -> {de_pieces[row.argmax()]:12s} (weight {row.max():.2f}){expected}")

# %% [markdown]
# The rows marked with a dictionary word can be checked at a glance. Identical German
# pieces get identical scores, so a word whose translation occurs twice splits its
# weight between the two. Other rows may settle elsewhere even where their translation
# is on the axis: the alignment only needs to be good enough for the match decision.

# %% [markdown]
# ## A bag of words
#
# Nothing in steps 1 to 3 depends on where a word stands: the model sees each sentence
# as a bag of words. Shuffling the German pieces (padding included) leaves the
# prediction unchanged, up to float rounding:

# %%
shuffled = b[:, rng.permutation(b.shape[1])]
print("probabilities (no match, match), original order:", np.round(keras.ops.softmax(model((a, b))).numpy()[0], 4))
print("probabilities (no match, match), shuffled German:",
      np.round(keras.ops.softmax(model((a, shuffled))).numpy()[0], 4))

# %% [markdown]
# For deciding whether two short descriptions say the same thing that is often enough;
# it is not for translation, where the order of the output matters. The paper's optional
# *intra-sentence attention* (section 3.4, `intra_attention=True`) lets each sentence
# first attend to itself with a bias that depends on the distance between words, a
# small step towards what the Transformer does with self-attention and position
# encodings (tutorials 05 and 07).
#
# ## Recap
#
# * Step 1 aligns each word with a soft mixture of the other sentence's words, in both
#   directions; step 2 compares each word with what it was aligned to; step 3 sums and
#   classifies.
# * Every word is processed on its own except in the attention and the sums, so the work
#   parallelises and word order is invisible: shuffling a sentence's pieces leaves the
#   prediction unchanged.
# * The alignment scores are products of two learned vectors. From Keras' small initial
#   word vectors the alignments stayed nearly flat and the model fitted its training
#   pairs without aligning, and generalised worse; from larger ones (std 1) they were
#   peaked, validation accuracy was higher, and most dictionary words aligned with their
#   translation.
#
# ## Exercises
#
# 1. Shuffle the *English* pieces of a validation pair instead of the German ones. Does the
#    prediction change? *Hint:* shuffle `a` as the bag-of-words cell shuffles `b`, then
#    compare `model((a, b))` with `model((shuffled_english, b))`.
# 2. Work out by hand the parameter counts that the table above printed for $F$, $G$ and
#    $H$ with `hidden_dim=100`: each is two dense layers of `hidden_dim` units with biases;
#    $F$ reads `hidden_dim` features per word, $G$ a word and its aligned mixture side by
#    side, $H$ the two sums side by side. *Hint:* a dense layer from $n$ inputs to $m$
#    units has $n \cdot m + m$ parameters; first work out the input width of each net's
#    first layer.
# 3. The bag-of-words model cannot tell "a dog bites a man" from "a man bites a dog". Why
#    does that rarely matter on this task? *Hint:* read `with_negatives`: where does a
#    negative's German side come from, and could it differ from the match only in word order?
#
# ## Papers
#
# * Parikh, Täckström, Das and Uszkoreit (2016). [A Decomposable Attention Model for Natural Language Inference](https://arxiv.org/abs/1606.01933).
# * Pennington, Socher and Manning (2014). [GloVe: Global Vectors for Word Representation](https://aclanthology.org/D14-1162/).
#
# ## Solutions
#
# <details><summary>1. Shuffling the other side</summary>
#
# It does not change (up to float rounding): steps 1 to 3 treat both sentences the same way,
# each as a bag of pieces.
#
# ```python
# shuffled_english = a[:, rng.permutation(a.shape[1])]
# print(keras.ops.softmax(model((shuffled_english, b))).numpy()[0].round(4))
# assert np.allclose(model((a, b)), model((shuffled_english, b)), atol=1e-4)
# ```
# </details>
#
# <details><summary>2. Parameters of F, G and H</summary>
#
# $F$: $(100 \cdot 100 + 100) + (100 \cdot 100 + 100) = 20{,}200$. $G$ and $H$ read 200 features:
# $(200 \cdot 100 + 100) + (100 \cdot 100 + 100) = 30{,}200$ each. With the classifier
# ($100 \cdot 2 + 2 = 202$) and the projection of the word vectors ($100 \cdot 100$, no bias),
# 90,802 parameters besides the word vectors, which hold `vocab_size` × 100 more.
#
# ```python
# assert model.attend_feedforward.count_params() == 2 * (100 * 100 + 100)
# assert model.compare_feedforward.count_params() == (200 * 100 + 100) + (100 * 100 + 100)
# assert model.aggregate_feedforward.count_params() == (200 * 100 + 100) + (100 * 100 + 100)
# ```
# </details>
#
# <details><summary>3. Word order</summary>
#
# A negative here pairs an English sentence with the translation of a *different* sentence, so
# it almost always differs in words, not only in their order. A negative made by swapping
# subject and object would need word order, and this model would fail on it; the paper's
# intra-sentence attention (section 3.4) adds some word-order information through a
# bias that depends on the distance between words.
# </details>
