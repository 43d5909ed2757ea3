"""The exported SavedModel, loaded the ways TF Serving and its users load it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.serving import export
from tests.serving.conftest import EXPORTED, MAX_SOURCE_LENGTH

# Runs in a fresh interpreter: only tensorflow, then tensorflow_text. The job: {name: [export folder, sentences]}.
_CHILD = r"""
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

job = json.load(open(sys.argv[1]))
report = {}
for name, (path, _) in job.items():
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    ops = sorted({n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def})
    report[name] = {"ops": ops, "not_core": [op for op in ops if op_def_registry.get(op) is None]}
import tensorflow_text  # registers the TF Text ops the model server links in
for name, (path, sentences) in job.items():
    report[name]["unregistered"] = [op for op in report[name]["ops"] if op_def_registry.get(op) is None]
    out = tf.saved_model.load(path).signatures["serving_default"](sentences=tf.constant(sentences))
    report[name]["translations"] = [t.decode("utf-8") for t in out["translations"].numpy()]
    report[name]["scores"] = out["scores"].numpy().tolist()
report["modules"] = sorted(
    m for m in sys.modules if m.split(".")[0] in ("keras_attention", "keras_hub", "keras")
)
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def in_a_fresh_process(translator, exports, validation_sample, tmp_path_factory):
    """`(report, xla_exports)`: the exports, plain and XLA-compiled (`xla_greedy`, `xla_beam`), loaded by one
    fresh interpreter with only TensorFlow and TensorFlow Text (it pays for TensorFlow once), and what it saw."""
    root = tmp_path_factory.mktemp("fresh_process")
    xla = {method: export(translator, str(root / method), method=method, jit_compile=True, **settings)
           for method, settings in EXPORTED.items()}
    job = {**{method: [path, validation_sample] for method, path in exports.items()},
           **{f"xla_{method}": [path, validation_sample[:40] + [""]] for method, path in xla.items()}}
    (root / "job.json").write_text(json.dumps(job))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(root / "job.json")], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": ""}, cwd=str(root))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("REPORT ", 1)[1]), xla


@pytest.mark.xdist_group("export_fresh_process")  # one worker: the fresh process runs once
def test_separate_process_with_only_tf_and_tf_text_translates_like_memory(
    translator, validation_sample, in_a_fresh_process
):
    report, _ = in_a_fresh_process
    print("\nmodules of keras* in the child:", report["modules"])
    assert not [m for m in report["modules"] if m.split(".")[0] in ("keras_attention", "keras_hub")]
    for method, options in EXPORTED.items():
        seen = report[method]
        print(method, "ops outside core TensorFlow:", seen["not_core"])
        # Every op is TensorFlow's or, for the few text ops, TensorFlow Text's; no Python ops.
        assert seen["unregistered"] == []
        assert set(seen["not_core"]) <= {"NormalizeUTF8", "WordpieceTokenizeWithOffsets"}
        assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & set(seen["ops"])
        expected = translator.translate(validation_sample, method=method, **options)
        assert seen["translations"] == expected.texts
        np.testing.assert_allclose(seen["scores"], expected.scores, rtol=1e-4, atol=1e-4)


def test_tf1_session_like_the_model_server(exports, signatures, validation_sample):
    sentences = validation_sample[:8]
    expected = signatures["beam"][0](sentences=tf.constant(sentences))
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], exports["beam"])
        signature = meta_graph.signature_def["serving_default"]
        assert signature.method_name == "tensorflow/serving/predict"
        assert list(signature.inputs) == ["sentences"]
        names = sorted(signature.outputs)
        fetched = session.run(
            [signature.outputs[n].name for n in names],
            feed_dict={signature.inputs["sentences"].name: sentences},
        )
        ids_signature = meta_graph.signature_def["translate_ids"]
        tokens = session.run(
            ids_signature.outputs["tokens"].name,
            feed_dict={ids_signature.inputs["source_ids"].name: [[5, 6, 7], [8, 0, 0]]},
        )
    assert names == ["scores", "translations", "truncated"]
    result = dict(zip(names, fetched))
    assert result["translations"].tolist() == expected["translations"].numpy().tolist()
    np.testing.assert_allclose(result["scores"], expected["scores"].numpy(), rtol=1e-5)
    assert tokens.shape[0] == 2


def test_inputs_of_the_wrong_rank_fail_with_what_the_signature_takes(exports, signatures):
    translate, translate_ids, _ = signatures["greedy"]
    for sentences in (tf.constant([["a dog", "a cat"]]), tf.constant("a dog")):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"`sentences` must be a vector of strings, shape \(B,\)"):
            translate(sentences=sentences)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"`source_ids` must be a matrix of int32 ids, shape \(B, S\)"):
        translate_ids(source_ids=tf.constant([5, 6, 7]))
    # The model server's way: a C++ session on the graph after its optimisations,
    # which feeds a tensor of any shape to a placeholder of unknown rank.
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], exports["greedy"])
        signature = meta_graph.signature_def["serving_default"]
        assert signature.inputs["sentences"].tensor_shape.unknown_rank
        translations = signature.outputs["translations"].name
        feed = signature.inputs["sentences"].name
        with pytest.raises(tf.errors.InvalidArgumentError, match="Received a tensor of shape.*1 2"):
            session.run(translations, feed_dict={feed: [["a dog", "a cat"]]})
        assert session.run(translations, feed_dict={feed: ["", " "]}).tolist() == [b"", b""]


def test_vocabularies_are_assets_not_graph_constants(translator, exports):
    from tensorflow.core.protobuf import saved_model_pb2

    path = exports["greedy"]
    for side, tokenizer in (("source", translator.source_tokenizer), ("target", translator.target_tokenizer)):
        with open(os.path.join(path, "assets", f"{side}_vocabulary.txt"), encoding="utf-8") as f:
            assert f.read().split("\n")[:-1] == tokenizer.vocabulary
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    largest = max(
        (len(n.attr["value"].tensor.string_val) for n in nodes if n.op == "Const"), default=0
    )
    assert largest < 50  # no vocabulary-sized string constant
    assert {os.path.basename(a.filename) for a in proto.meta_graphs[0].asset_file_def} == {
        "source_vocabulary.txt", "target_vocabulary.txt",
    }
    with open(os.path.join(path, "assets.extra", "keras_attention.json")) as f:
        assert json.load(f)["method"] == "greedy"


def test_the_export_records_the_decoding_options_it_was_given(exports, translator_dir):
    from keras_attention.decoding.options import EXPORT_DEFAULTS, DecodingOptions, decoding_options

    max_length = json.loads((translator_dir / "translator.json").read_text())["max_target_length"]
    fields = DecodingOptions.__dataclass_fields__
    given = {method: EXPORT_DEFAULTS.replace(method=method, **settings) for method, settings in EXPORTED.items()}
    for name, options in given.items():
        with open(os.path.join(exports[name], "assets.extra", "keras_attention.json"), encoding="utf-8") as f:
            metadata = json.load(f)
        recorded = decoding_options(None, EXPORT_DEFAULTS, **{k: v for k, v in metadata.items() if k in fields})
        assert recorded.used() == options.replace(max_length=max_length).used()
    assert metadata["method"] == "beam" and metadata["length_penalty"] == DecodingOptions().length_penalty


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_hostile_inputs(method, signatures, translator):
    translate, translate_ids, _ = signatures[method]
    words = "a man in a blue shirt rides a bike "
    long_words = (words * 400)[:10_000]
    batch = [
        "", "   ", long_words, "x" * 10_000, b"caf\xe9 \xff\xfe men", b"\xc3", "A \x00 dog \u2028 runs.",
    ]
    out = translate(sentences=tf.constant(batch))
    assert [out[k].shape[0] for k in ("translations", "scores", "truncated")] == [len(batch)] * 3
    assert out["truncated"].numpy().tolist() == [False, False, True, False, False, False, False]
    assert np.all(np.isfinite(out["scores"].numpy()))
    for text in out["translations"].numpy():
        text.decode("utf-8")  # valid UTF-8 whatever came in
    assert out["translations"].numpy()[:2].tolist() == [b"", b""]  # empty in, empty out
    assert out["scores"].numpy()[:2].tolist() == [0.0, 0.0]

    # The long sentence translates as its first max_source_length - 2 pieces.
    tokenizer = translator.source_tokenizer
    cut = tokenizer.detokenize(tokenizer.tokenize([long_words])[:, : MAX_SOURCE_LENGTH - 2]).numpy()[0]
    cut_translation = translate(sentences=tf.constant([cut]))["translations"].numpy()[0]
    assert cut_translation == out["translations"].numpy()[2]
    # Bad bytes translate like their U+FFFD replacement.
    replaced = b"caf\xe9 \xff\xfe men".decode("utf-8", "replace")
    assert translate(sentences=tf.constant([replaced]))["translations"][0] == out["translations"][4]

    many = translate(sentences=tf.constant(["a dog runs .", "two men"] * 500))
    assert many["translations"].shape == (1000,) and many["scores"].shape == (1000,)
    assert many["translations"][0] == many["translations"][998]
    empty = translate(sentences=tf.zeros([0], tf.string))
    assert [empty[k].shape for k in ("translations", "scores", "truncated")] == [(0,)] * 3

    ids = translate_ids(source_ids=tf.constant([[5, 6, 0], [10**6, -4, 7], [0, 0, 0]], tf.int32))
    assert ids["tokens"].shape == (3, translator.max_target_length)
    long_ids = translate_ids(source_ids=tf.fill([2, 5000], 9))
    assert long_ids["truncated"].numpy().tolist() == [True, True]
    none = translate_ids(source_ids=tf.zeros([0, 0], tf.int32))
    assert none["tokens"].shape == (0, translator.max_target_length)


def test_ids_signature_matches_the_string_signature(signatures, translator, validation_sample):
    translate, translate_ids, _ = signatures["beam"]
    sentences = validation_sample[:6]
    pieces = translator.source_tokenizer.tokenize(sentences).to_tensor()
    by_ids = translate_ids(source_ids=tf.cast(pieces, tf.int32))
    by_text = translate(sentences=tf.constant(sentences))
    texts = translator.target_tokenizer.detokenize(by_ids["tokens"]).numpy()
    assert texts.tolist() == by_text["translations"].numpy().tolist()
    np.testing.assert_allclose(by_ids["scores"], by_text["scores"], rtol=1e-5)
    assert np.all(by_ids["lengths"].numpy() >= 1)


def test_export_arguments_and_versions(translator, tmp_path, monkeypatch):
    from keras_attention.decoding.translator import Translator

    traced = []  # the decoding loops the export traces: one, which both signatures call
    decode = Translator._decode
    monkeypatch.setattr(Translator, "_decode", lambda self, *args, **kwargs: traced.append(1) or decode(
        self, *args, **kwargs))
    base = tmp_path / "model"
    for existing in ("1", "5", "notes"):
        (base / existing).mkdir(parents=True)
    with pytest.raises(ValueError, match="version=5"):
        export(translator, str(base), version=5)  # TF Serving versions are immutable
    with pytest.raises(ValueError, match="method='sample'"):
        export(translator, str(base), method="sample")
    with pytest.raises(ValueError, match="beam_size=0"):
        export(translator, str(base), beam_size=0)
    with pytest.raises(ValueError, match="max_length=500"):
        export(translator, str(base), max_length=500)  # longer than the model's positions
    with pytest.raises(ValueError, match="translator="):
        export(translator.model, str(base))
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(ValueError, match="file.txt is a file; a SavedModel export goes into a folder"):
        export(translator, str(tmp_path / "file.txt"))
    path = export(translator, str(base), method="greedy", max_length=8)  # the next version
    assert path == str(base / "6") and sorted(os.listdir(base)) == ["1", "5", "6", "notes"] and len(traced) == 1
    short = tf.saved_model.load(path).signatures["translate_ids"]
    assert short(source_ids=tf.constant([[5, 6]]))["tokens"].shape == (1, 8)


def test_rnn_with_attention_exports_too(translator, validation_sample, tmp_path):
    from keras_attention.decoding.translator import Translator
    from keras_attention.models import Seq2SeqRNN

    source, target = translator.source_tokenizer, translator.target_tokenizer
    model = Seq2SeqRNN(source.vocab_size, target.vocab_size, attention="luong", embedding_dim=16, units=24)
    ids = np.array([[2, 5, 6, 3]], "int32")
    model((ids, ids))
    rnn = Translator(model, source, target, max_source_length=30, max_target_length=12)
    path = export(rnn, str(tmp_path / "rnn"), method="beam", beam_size=2)
    sentences = validation_sample[:5] + [""]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], path).signature_def["serving_default"]
        texts = session.run(
            signature.outputs["translations"].name, feed_dict={signature.inputs["sentences"].name: sentences}
        )
    assert [t.decode("utf-8") for t in texts] == rnn(sentences, method="beam", beam_size=2)


@pytest.mark.xdist_group("export_fresh_process")  # one worker: the fresh process runs once
def test_xla_compiled_export_translates_like_the_plain_one(
    translator, validation_sample, in_a_fresh_process, tmp_path
):
    """`jit_compile=True` saves the decoding loop as an XLA-compiled function; reloaded in
    a process with only TensorFlow and TensorFlow Text, it translates as the translator does."""
    from tensorflow.core.protobuf import saved_model_pb2

    report, exports = in_a_fresh_process
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(exports["beam"], "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    library = proto.meta_graphs[0].graph_def.library.function
    assert any(f.attr["_XlaMustCompile"].b for f in library)  # the decoding loop, marked for XLA
    with open(os.path.join(exports["beam"], "assets.extra", "keras_attention.json"), encoding="utf-8") as f:
        assert json.load(f)["jit_compile"] is True
    for method, options in EXPORTED.items():
        seen = report[f"xla_{method}"]
        assert seen["unregistered"] == []
        expected = translator.translate(validation_sample[:40] + [""], method=method, **options)
        assert seen["translations"] == expected.texts
        np.testing.assert_allclose(seen["scores"], expected.scores, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="jit_compile=1"):
        export(translator, str(tmp_path / "bad"), jit_compile=1)
