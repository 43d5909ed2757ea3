"""Export a `Translator` as a SavedModel for TF Serving: strings in, translations out.

The SavedModel holds the model's weights, both WordPiece vocabularies as asset
files (the lookup tables are initialized from them when the model loads) and
two signatures, traced with a batch dimension of None. Their inputs are
declared of unknown rank and checked in the graph: a tensor of the wrong rank
fails with one message saying what the signature takes.

- `serving_default`: `sentences` string `(B,)` -> `translations` string `(B,)`,
  `scores` float32 `(B,)` and `truncated` bool `(B,)` (the source was longer
  than the model's maximum and was cut).
- `translate_ids`: `source_ids` int32 `(B, S)`, WordPiece ids of the source
  vocabulary without [START]/[END], 0-padded -> `tokens` int32 `(B, L)`
  (target ids, [END] included, then 0), `scores`, `lengths` int32 `(B,)` and
  `truncated`. For clients that tokenize themselves.

Tokenizing, decoding (greedy, or beam search with a fixed beam size and
length penalty, chosen at export time) and detokenizing all run in the graph,
with TensorFlow and TensorFlow Text ops only, which the standard TF Serving
model server includes. Models go to `path/<version>/`, the layout TF Serving
watches.
"""

import json
import os
import shutil
import tempfile

import tensorflow as tf

from keras_attention import __version__
from keras_attention.base.tensorflow_only import require_tensorflow
from keras_attention.base.validation import check_choice, check_positive_int
from keras_attention.data.tokenizers import SubwordTokenizer
from keras_attention.decoding.options import EXPORT_DEFAULTS, SEARCH_METHODS
from keras_attention.decoding.translator import Translator

SERVING_SIGNATURE = "serving_default"
"""The export's strings-in, strings-out signature, the one TF Serving calls by default."""
IDS_SIGNATURE = "translate_ids"
"""The export's token-ids signature (ids in, ids and scores out), for clients that tokenize themselves."""
EXPORT_METHODS = SEARCH_METHODS
"""The decoding methods an export can hold: greedy and beam search (sampling is not exported)."""
METADATA_FILE = os.path.join("assets.extra", "keras_attention.json")


def export(translator, path, options=None, version=None, jit_compile=False, **settings):
    """Write `translator` as a SavedModel that TF Serving serves (TensorFlow backend only).

    Args:
        translator: a `decoding.Translator` (a trained model and its tokenizers).
        path: str. The model's base folder, as given to TF Serving
            (`--model_base_path`); the SavedModel goes to `path/<version>/`.
        options: a `decoding.DecodingOptions` (method `"greedy"` or
            `"beam"`; its `max_length`, at most the model's maximum, is the
            most output tokens), or a method name. Defaults to None
            (`EXPORT_DEFAULTS`: beam search, 4 hypotheses, length penalty 0.6,
            the translator's `max_target_length`).
        version: int or None. The version folder; it must not exist yet. None
            takes the next number after the versions already in `path` (1 in
            an empty folder). Defaults to None.
        jit_compile: bool. Decode with XLA, as `Translator(jit_compile=True)`
            does: the decoding loop (not the tokenizers) is saved as
            XLA-compiled chunks of steps between which finished sentences
            leave the batch; each shape (batch size, cache room, source
            length bucket) compiles once when first served.
            TensorFlow's loader runs it; TF Serving's support for XLA is
            experimental (on a CPU: `--xla_cpu_compilation_enabled=true`,
            tensorflow/serving#1858). Defaults to False.
        **settings: fields of `DecodingOptions` that replace those of
            `options` (`method="greedy"`, `beam_size=8`, `max_length=64`).

    Returns:
        str, the version folder written (`path/<version>`).

    Example:

    >>> export(translator, "/models/translator", DecodingOptions(method="beam", beam_size=8))  # doctest: +SKIP
    '/models/translator/1'
    """
    require_tensorflow("SavedModel export")
    if not isinstance(translator, Translator):
        raise ValueError(f"`translator` must be a `Translator`. Received: translator={translator!r}")
    options = translator.resolve_options(options, EXPORT_DEFAULTS, **settings)
    check_choice("method", options.method, EXPORT_METHODS)
    if not isinstance(jit_compile, bool):
        raise ValueError(f"`jit_compile` must be True or False. Received: jit_compile={jit_compile!r}")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{path} is a file; a SavedModel export goes into a folder (TF Serving's model base "
                         "folder): give a new or existing folder.")
    version = _version(path, version)
    os.makedirs(path, exist_ok=True)
    # Write into a hidden folder and rename it at the end: TF Serving watches
    # `path` and must never see a half-written version.
    staging = tempfile.mkdtemp(prefix=f".export-{version}-", dir=path)
    try:
        with tempfile.TemporaryDirectory() as vocabulary_dir:
            tokenizers = []
            sides = (("source", translator.source_tokenizer), ("target", translator.target_tokenizer))
            for side, tokenizer in sides:
                vocabulary_file = os.path.join(vocabulary_dir, f"{side}_vocabulary.txt")
                tokenizer.save_vocabulary(vocabulary_file)
                config = {**tokenizer.get_config(), "vocabulary_file": vocabulary_file}
                tokenizers.append(SubwordTokenizer(**config, name=f"{side}_tokenizer"))
            # The same translator, over tokenizers whose tables are read from the asset files.
            serving = Translator(translator.model, *tokenizers, translator.max_source_length, options.max_length,
                                 jit_compile=jit_compile)
            module = _serving_module(serving, options)
            signatures = {
                SERVING_SIGNATURE: module.translate.get_concrete_function(),
                IDS_SIGNATURE: module.translate_ids.get_concrete_function(),
            }
            tf.saved_model.save(module, staging, signatures=signatures)
        metadata = {
            "method": options.method,
            "beam_size": options.beam_size,  # as 0.3 wrote them, whatever the method
            "length_penalty": options.length_penalty,
            "max_length": options.max_length,
            "max_source_length": serving.max_source_length,
            "jit_compile": jit_compile,
            "signatures": [SERVING_SIGNATURE, IDS_SIGNATURE],
            "keras_attention_version": __version__,
            "tensorflow_version": tf.__version__,
        }
        os.makedirs(os.path.join(staging, os.path.dirname(METADATA_FILE)))
        with open(os.path.join(staging, METADATA_FILE), "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=2)
        target = os.path.join(path, str(version))
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _version(path, version):
    """The version number to write: `version` if free, else an error; None: the next one."""
    existing = [int(n) for n in os.listdir(path) if n.isdigit()] if os.path.isdir(path) else []
    if version is None:
        return max(existing, default=0) + 1
    version = check_positive_int("version", version)
    if os.path.exists(os.path.join(path, str(version))):
        raise ValueError(
            f"{os.path.join(path, str(version))!r} already exists: TF Serving versions are "
            f"immutable, export to a new version (or version=None, without --version, for the next one). "
            f"Received: version={version}"
        )
    return version


def _serving_module(translator, options):
    """A `tf.Module` tracking the weights and the tokenizers' tables (with their
    vocabulary assets), and the two serving functions."""
    module = tf.Module(name="translator")
    # Track the weights alone (not the Keras model, whose optimizer state is not
    # needed), as the tf.Variables the functions capture: a Keras variable would
    # be saved as a copy, which the TF1 / C++ loader restores while the
    # functions still read the uninitialized original.
    module.model_variables = [_tf_variable(v) for v in translator.model.variables]
    module.source_tokenizer = translator.source_tokenizer
    module.target_tokenizer = translator.target_tokenizer
    max_source_length = translator.max_source_length
    # Both signatures call one decoding loop, traced here (a `tf.function` called while another is traced
    # would be traced again for each caller).
    decode = translator.decoding_function(options).get_concrete_function()

    def translate(sentences):
        sentences = _with_rank(sentences, "sentences", "a vector of strings, shape (B,)", 1)
        source_ids, lengths = translator.source_ids(sentences)
        result = decode(source_ids)
        blank = tf.strings.length(tf.strings.strip(sentences)) == 0  # empty in, empty out
        return {
            "translations": tf.where(blank, "", translator.target_tokenizer.detokenize(result.tokens)),
            "scores": tf.where(blank, tf.zeros_like(result.scores), result.scores),
            "truncated": lengths > max_source_length,
        }

    def translate_ids(source_ids):
        source_ids = _with_rank(source_ids, "source_ids", "a matrix of int32 ids, shape (B, S)", 2)
        tokenizer = translator.source_tokenizer
        ids = tf.where((source_ids < 0) | (source_ids >= tokenizer.vocab_size), tokenizer.unk_id, source_ids)
        pieces = tf.RaggedTensor.from_tensor(ids, padding=tokenizer.pad_id)  # (B, None)
        source_ids = _add_markers(pieces, tokenizer, max_source_length)
        result = decode(source_ids)
        return {
            "tokens": result.tokens,
            "scores": result.scores,
            "lengths": result.lengths,
            "truncated": pieces.row_lengths() + 2 > max_source_length,
        }

    # The inputs' rank is left unknown in the signatures and checked in the
    # graph: a signature of shape (-1) lets graph optimisations assume rank 1,
    # and a rank-2 tensor (which the model server passes through unchecked)
    # would then fail deep inside the tokenizer with an unrelated message.
    module.translate = tf.function(
        translate, input_signature=[tf.TensorSpec(None, tf.string, name="sentences")], autograph=False
    )
    module.translate_ids = tf.function(
        translate_ids, input_signature=[tf.TensorSpec(None, tf.int32, name="source_ids")], autograph=False
    )
    return module


def _with_rank(tensor, name, expected, rank):
    """`tensor` (rank 1 or 2 expected), once a check of its rank has passed; with that rank as its static shape.

    The reshape cannot fail whatever the rank, so the check's message is the
    error a client sees, whichever op the runtime happens to run first.
    """
    check = tf.debugging.Assert(
        tf.equal(tf.rank(tensor), rank), [f"`{name}` must be {expected}. Received a tensor of shape", tf.shape(tensor)]
    )
    if rank == 1:
        shape = [-1]
    else:  # (first dimension, product of the others), 1 for those it lacks: exact when the rank is 2
        padded = tf.concat([tf.shape(tensor), [1, 1]], axis=0)
        shape = tf.stack([padded[0], tf.reduce_prod(padded[1:])])
    with tf.control_dependencies([check]):
        return tf.identity(tf.reshape(tensor, shape))


def _tf_variable(variable):
    """The `tf.Variable` behind a Keras variable (TensorFlow backend)."""
    value = getattr(variable, "value", variable)
    return value if isinstance(value, tf.Variable) else variable


def _add_markers(pieces, tokenizer, max_source_length):
    """Ragged piece ids `(B, None)` -> int32 `(B, S)` as the model takes them:
    `[START] pieces [END]`, cut to `max_source_length` (keeping [END]), 0-padded."""
    pieces = tf.cast(pieces[:, : max_source_length - 2], tf.int32)
    batch = pieces.nrows()
    start = tf.fill([batch, 1], tf.constant(tokenizer.start_id, tf.int32))
    end = tf.fill([batch, 1], tf.constant(tokenizer.end_id, tf.int32))
    return tf.concat([start, pieces, end], axis=1).to_tensor(default_value=tokenizer.pad_id)
