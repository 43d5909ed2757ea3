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
# # 12 · Export, reload, and serve with TF Serving
#
# A trained translator is only useful once something can call it. TF Serving, the
# TensorFlow model server, loads a **SavedModel** and answers REST and gRPC requests
# with no Python of ours in the loop. So everything from the input string to the output
# string, tokenizer, beam search and detokenizer included, has to be TensorFlow ops in
# the saved graph. `keras_attention.serving.export` writes such a SavedModel. The first
# code cell prints which mode produced the outputs.

# %% [markdown]
# **What you will learn**
#
# * what a SavedModel for TF Serving must contain: tokenizer, decoder and detokenizer as
#   TensorFlow ops, strings in and strings out;
# * the versioned folder layout TF Serving watches;
# * how to call the serving signature, and reload it in a process without this library;
# * how REST and gRPC requests look, and how the time per sentence changes with batch size.
#
# **What you need**: tutorial 10 (its Transformer, reused from the cache when 10 has run with
# the same settings). Docker, to run TF Serving itself, is optional.

# %%
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import matplotlib.pyplot as plt
import tensorflow as tf

import _common
from _common import QUICK, figure_path
from keras_attention import serving
from keras_attention.serving import requests as tfs

_common.start("12 Export, reload and serve")

# %% [markdown]
# ## The translator to export
#
# The Transformer of tutorial 10 (from the cache if 10 has run with the same settings,
# trained now otherwise).

# %%
translation_data = _common.load_translation_data()
translator, _ = _common.train_translator("transformer", translation_data)
sentences = [en for en, _ in translation_data.test_pairs[:3]]
expected = translator.translate(sentences, method="beam", beam_size=4, length_penalty=0.6).texts
for source, output in zip(sentences, expected):
    print(f"{source}\n  -> {output}")

# %% [markdown]
# ## Export
#
# `serving.export(translator, path, method="beam", beam_size=4)` writes `path/1/`.
# TF Serving watches the *base* folder `path` and serves the highest numbered version
# in it, so a new model is deployed by exporting `path/2/` next to the old one. The
# decoding method and its settings are fixed at export time. The vocabularies are
# stored as asset files, from which the lookup tables are rebuilt when the model loads.

# %%
workdir = pathlib.Path(tempfile.mkdtemp(prefix="keras_attention_tutorial_12_"))
base = workdir / "translator"
started = time.time()
version_dir = serving.export(translator, str(base), method="beam", beam_size=4, length_penalty=0.6)
print(f"exported to <temporary folder>/{pathlib.Path(version_dir).relative_to(workdir)} "
      f"in {time.time() - started:.0f} s")
for path in sorted(pathlib.Path(version_dir).rglob("*")):
    if path.is_file():
        print(f"  {path.relative_to(base)}  ({path.stat().st_size:,} bytes)")

# %% [markdown]
# ## Reload and call the signature
#
# `tf.saved_model.load` gives back an object whose `signatures["serving_default"]` is
# the function TF Serving will call: a batch of strings in, a dict of tensors out
# (`translations`, `scores`, and `truncated`, which flags sentences cut to the maximum
# length). The two text ops inside come from TensorFlow Text, which must be imported
# before loading; in this notebook `keras_attention` has already imported it, and the
# separate process below imports it by name (the model server has them built in).

# %%
loaded = tf.saved_model.load(version_dir)
signature = loaded.signatures["serving_default"]
print("inputs: ", signature.structured_input_signature[1])
print("outputs:", signature.structured_outputs)
outputs = signature(sentences=tf.constant(sentences))
translations = [t.decode() for t in outputs["translations"].numpy()]
print("translations:", tuple(outputs["translations"].shape), " scores:", tuple(outputs["scores"].shape))
for text, score in zip(translations, outputs["scores"].numpy()):
    print(f"  {score:8.3f}  {text}")
print("same as the in-memory translator:", translations == expected)

# %% [markdown]
# Nothing of this library is needed to run the export. A fresh Python process that
# imports only TensorFlow and TensorFlow Text gives the same output:

# %%
program = (
    "import sys, tensorflow as tf, tensorflow_text\n"
    "signature = tf.saved_model.load(sys.argv[1]).signatures['serving_default']\n"
    "out = signature(sentences=tf.constant(sys.argv[2:]))\n"
    "print('\\n'.join(t.decode() for t in out['translations'].numpy()))\n"
)
child = subprocess.run([sys.executable, "-c", program, version_dir, *sentences], capture_output=True, text=True,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
print("exit code", child.returncode)
print("same translations:", child.stdout.splitlines() == expected)

# %% [markdown]
# ## Serving it
#
# With Docker, the official image serves the base folder (REST on port 8501, gRPC on
# 8500):
#
# ```bash
# docker run -p 8501:8501 -p 8500:8500 \
#   --mount type=bind,source=/absolute/path/to/translator,target=/models/translator \
#   -e MODEL_NAME=translator -t tensorflow/serving
# ```
#
# A REST client posts a JSON body to `/v1/models/translator:predict`.
# `serving.requests` builds the body (the "row" layout `instances`, one entry per
# sentence, or the "columnar" layout `inputs`) and parses the reply.

# %%
body = tfs.rest_request(sentences)
print("POST", tfs.rest_url(model_name="translator"))
print(json.dumps(body, ensure_ascii=False, indent=1)[:400])
print("\ncurl -s -X POST", tfs.rest_url(model_name="translator"), "-d '" + json.dumps(tfs.rest_request(sentences[:1])) + "'")

# %% [markdown]
# TF Serving answers a row-layout request with one object per sentence. Here is that
# reply built from the signature's outputs above, and what `parse_rest_reply` makes of
# it: one list per output.

# %%
reply = {"predictions": [
    {"translations": t, "scores": float(s), "truncated": bool(c)}
    for t, s, c in zip(translations, outputs["scores"].numpy(), outputs["truncated"].numpy())
]}
parsed = tfs.parse_rest_reply(json.dumps(reply))
print({name: values[:2] for name, values in parsed.items()})

# %% [markdown]
# For gRPC, `tfs.predict_request(sentences, model_name="translator")` builds a
# `PredictRequest` for `PredictionService.Predict` (it needs the
# `tensorflow-serving-api` package, the `serving` extra), and
# `tfs.parse_predict_response` reads the answer. `docs/serving.md` lists both
# signatures (the second, `translate_ids`, takes token ids for clients with their own
# tokenizer) and how the export is tested without a model server.
#
# ## How long does a request take?
#
# The signature translates a whole batch in one call, so the cost per sentence falls as
# batches grow, until the machine is busy. Times for beam search with 4 beams, on the
# device the first line names:

# %%
print("timed on", _common.device_name())
pool = [en for en, _ in translation_data.test_pairs]
sizes = [1, 4, 16] if QUICK else [1, 4, 16, 64]
per_sentence = []
signature(sentences=tf.constant(pool[:2]))  # warm up
for size in sizes:
    batch = tf.constant((pool * 2)[:size])
    started = time.time()
    signature(sentences=batch)
    per_sentence.append(1000 * (time.time() - started) / size)
    print(f"batch {size:3d}: {per_sentence[-1]:7.1f} ms per sentence")
fig, ax = plt.subplots(figsize=(5, 3))
ax.bar([str(s) for s in sizes], per_sentence, color="tab:green")
ax.set_xlabel("sentences per request")
ax.set_ylabel("ms per sentence")
ax.set_title(f"exported Transformer, beam 4, {_common.device_name()}")
fig.tight_layout()
fig.savefig(figure_path("12_serving_latency.png"), dpi=100)

# %% [markdown]
# That is the end of the path: from an RNN squeezing a sentence into one vector, through
# alignments and attention as lookup, to a Transformer trained, compared, scaled out and
# served.

# %%
shutil.rmtree(workdir)  # the export was only for this tutorial

# %% [markdown]
# ## Recap
#
# * `serving.export` writes `path/1/`, a SavedModel whose `serving_default` signature takes a
#   batch of strings and returns `translations`, `scores` and `truncated`.
# * The decoding method is fixed at export time; a new version goes next to the old one.
# * A fresh process with TensorFlow and TensorFlow Text only gives the same translations.
# * `serving.requests` builds REST bodies and gRPC requests and parses the replies.
# * Larger batches cost less per sentence, until the machine is busy.
#
# ## Exercises
#
# 1. Export a greedy version as version 2 in the same base folder and compare its translations
#    and time per sentence with the beam version. *Hint:* the last cell removed the folder, so
#    export the beam version again first; then
#    `serving.export(translator, str(base), method="greedy", version=2)`.
# 2. Build the REST body in the columnar layout. How does it differ from the row layout?
#    *Hint:* `tfs.rest_request(sentences, format="inputs")`.
# 3. Translate a sentence longer than the model's maximum length through the signature and
#    read the `truncated` output. *Hint:* the limit counts WordPiece pieces, markers included
#    (`translator.max_source_length`), and a word is at least one piece.
#
# ## Papers
#
# * Olston et al. (2017). [TensorFlow-Serving: Flexible, High-Performance ML Serving](https://arxiv.org/abs/1712.06139).
#
# ## Solutions
#
# <details><summary>1. A greedy version</summary>
#
# ```python
# beam_dir = serving.export(translator, str(base), method="beam", beam_size=4, length_penalty=0.6)
# greedy_dir = serving.export(translator, str(base), method="greedy", version=2)
# for name, path in (("beam", beam_dir), ("greedy", greedy_dir)):
#     serve = tf.saved_model.load(path).signatures["serving_default"]
#     serve(sentences=tf.constant(sentences))  # the first call also builds the graph
#     started = time.time()
#     translations = serve(sentences=tf.constant(sentences))["translations"].numpy()
#     print(f"{name}: {1000 * (time.time() - started) / len(sentences):.0f} ms a sentence",
#           [t.decode() for t in translations])
# shutil.rmtree(workdir)
# ```
# TF Serving would now serve version 2, the highest. Greedy keeps one hypothesis instead of
# four, so it is faster; its translations may differ from the beam's where beam search found a
# better-scoring sentence.
# </details>
#
# <details><summary>2. Columnar layout</summary>
#
# The row layout sends `{"instances": [...]}`, one entry per sentence, and TF Serving answers
# `{"predictions": [...]}`, one object per sentence; the columnar layout sends
# `{"inputs": [...]}` (the signature has one input, so the list is that input's column) and
# is answered by `{"outputs": {...}}`, one list per output. `parse_rest_reply` reads both.
# </details>
#
# <details><summary>3. Truncation</summary>
#
# ```python
# limit = translator.max_source_length  # pieces, [START] and [END] included
# long_sentence = " ".join(["a dog runs on the beach"] * limit)  # 6 words a repeat: far over the limit
# out = signature(sentences=tf.constant([long_sentence]))
# print(limit, out["truncated"].numpy())  # 128 [ True]
# assert out["truncated"].numpy().all()
# ```
# The source is cut to the maximum length before translation, and the flag tells the client
# so. Size the sentence from the limit rather than by eye: 20 repeats of the sentence are
# about 120 pieces, under a limit of 128, and would most likely come back with `[False]`.
# </details>
