"""CTranslate2 export: CTranslate2 computes what our model computes, and its folder stands alone.

- Random Transformers of every layout (post- and pre-norm, tied, untied and
  shared embeddings, sinusoidal and learned positions, relu and gelu): the
  log-probability CTranslate2 gives each target token equals our model's
  (with [PAD] excluded, as our decoder excludes it).
- A tiny Transformer trained on the dates corpus: CTranslate2's greedy tokens
  equal our greedy decoder's on 50 sentences, and so do beam search's with
  no length penalty (where the two length-penalty formulas agree).
- The folder loads in a process that imports neither our package nor TensorFlow.
"""

import difflib
import json
import os
import subprocess
import sys

import ctranslate2
import keras
import numpy as np
import pytest

from keras_attention import data
from keras_attention.cli import main
from keras_attention.decoding.translator import Translator
from keras_attention.models import Transformer
from keras_attention.serving import CTranslate2Translator, export_ctranslate2
from keras_attention.training.losses import MaskedSparseCrossEntropy
from tests.explain.explain_helpers import dates_tokenizers, make_translator
from tests.models import model_checks

pytestmark = pytest.mark.xdist_group("ctranslate2")  # one worker: the dates Transformer is trained once

LAYOUTS = {
    "post-norm, tied, sinusoidal": {},
    "pre-norm, learned positions": dict(normalize_first=True, position="learned"),
    "untied output, gelu": dict(tie_output=False, activation="gelu"),
    "shared embeddings": dict(share_embeddings=True),
}


@pytest.fixture(scope="module")
def tokenizers():
    return dates_tokenizers()


@pytest.fixture(scope="module")
def dates_test():
    return [source.decode("utf-8") for source, _ in data.load_dates(50, "test", seed=1).as_numpy_iterator()]


def _our_log_probs(model, source_ids, target_ids):
    """Log-probability of each target token after [START] ([END] included), [PAD] excluded."""
    source = np.array([source_ids], "int32")
    target_in = np.array([target_ids[:-1]], "int32")
    logits = keras.ops.convert_to_numpy(model((source, target_in), training=False))[0]  # (T, V)
    logits[:, 0] = -np.inf
    top = logits.max(-1, keepdims=True)
    log_probs = logits - top - np.log(np.sum(np.exp(logits - top), -1, keepdims=True))
    return log_probs[np.arange(len(target_ids) - 1), target_ids[1:]]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_token_log_probabilities_match_ours(layout, tokenizers, tmp_path):
    source_tok, target_tok = tokenizers
    if layout == "shared embeddings":  # one vocabulary for both sides
        target_tok = source_tok
    keras.utils.set_random_seed(3)
    model = Transformer(source_tok.vocab_size, target_tok.vocab_size, num_layers=2, d_model=32, num_heads=4,
                        intermediate_dim=48, max_length=40, **LAYOUTS[layout])
    model((np.ones((1, 4), "int32"), np.ones((1, 3), "int32")))
    translator = Translator(model, source_tok, target_tok, max_source_length=24, max_target_length=12)
    engine = ctranslate2.Translator(export_ctranslate2(translator, str(tmp_path / "ct2")))

    pairs = list(data.load_dates(3, "train", seed=5).as_numpy_iterator())
    for source_text, target_text in pairs:
        source_pieces = source_tok.tokenize(source_text.decode()).numpy().tolist()
        target_pieces = target_tok.tokenize(target_text.decode()).numpy().tolist()
        scored = engine.score_batch([[source_tok.vocabulary[i] for i in source_pieces]],
                                    [[target_tok.vocabulary[i] for i in target_pieces]])[0]
        ours = _our_log_probs(model, [source_tok.start_id, *source_pieces, source_tok.end_id],
                              [target_tok.start_id, *target_pieces, target_tok.end_id])
        assert scored.tokens == [target_tok.vocabulary[i] for i in target_pieces] + ["[END]"]
        np.testing.assert_allclose(scored.log_probs, ours, atol=2e-4)


@pytest.fixture(scope="module")
def trained(tokenizers, tmp_path_factory):
    """A 2-layer Transformer trained 300 steps on dates, saved, and exported to CTranslate2."""
    source_tok, target_tok = tokenizers
    keras.utils.set_random_seed(0)
    batches = data.make_translation_dataset(data.load_dates(9600, "train", seed=0), source_tok, target_tok, 32,
                                            max_length=40, shuffle=True, seed=0)
    model = Transformer(source_tok.vocab_size, target_tok.vocab_size, num_layers=2, d_model=32, num_heads=4,
                        intermediate_dim=64, max_length=40, dropout=0.0)
    (source, target_in), _ = next(iter(batches))
    model((source[:1], target_in[:1]))  # built: the optimizer is then built before the step is traced
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=MaskedSparseCrossEntropy())
    model.fit(batches.take(300), verbose=0, shuffle=False)
    translator = Translator(model, source_tok, target_tok, max_source_length=40, max_target_length=16)
    root = tmp_path_factory.mktemp("trained")
    translator.save(str(root / "translator"))
    return translator, export_ctranslate2(translator, str(root / "ct2")), root


def _rows(tokens, end_id):
    """Output ids up to and including [END] (or the whole row)."""
    rows = []
    for row in np.asarray(tokens):
        row = [int(t) for t in row if t != 0]
        rows.append(row[: row.index(end_id) + 1] if end_id in row else row)
    return rows


@pytest.mark.parametrize("method, options", [("greedy", {}), ("beam", dict(beam_size=4, length_penalty=0.0))])
def test_same_tokens_as_our_decoder(trained, dates_test, method, options):
    translator, folder, _ = trained
    ours = translator.translate(dates_test, method=method, **options)
    theirs = CTranslate2Translator(folder).translate(dates_test, method=method, **options)
    end = translator.target_tokenizer.end_id
    assert _rows(theirs.tokens, end) == _rows(ours.tokens, end)
    assert theirs.texts == ours.texts
    assert sum(len(set(t)) > 3 for t in ours.texts) > 40  # real dates, not one repeated token


def test_folder_loads_without_our_package(trained, dates_test):
    translator, folder, _ = trained
    source_tok = translator.source_tokenizer
    sources = [[source_tok.vocabulary[i] for i in row] for row in source_tok.tokenize(dates_test[:10]).to_list()]
    code = (
        "import json, sys, ctranslate2\n"
        "engine = ctranslate2.Translator(sys.argv[1])\n"
        "results = engine.translate_batch(json.loads(sys.argv[2]), beam_size=1, min_decoding_length=0)\n"
        "print(json.dumps({'tokens': [r.hypotheses[0] for r in results],\n"
        "                  'imported': [m for m in ('keras_attention', 'tensorflow', 'keras') if m in sys.modules]}))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code, folder, json.dumps(sources)],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["imported"] == []
    ours = translator.translate(dates_test[:10])
    expected = [[translator.target_tokenizer.vocabulary[i] for i in row[:-1]]
                for row in _rows(ours.tokens, translator.target_tokenizer.end_id)]
    assert reply["tokens"] == expected


def test_int8_weights_translate_nearly_the_same(trained, dates_test, tmp_path):
    translator, folder, _ = trained
    int8 = export_ctranslate2(translator, str(tmp_path / "int8"), quantization="int8")
    assert os.path.getsize(os.path.join(int8, "model.bin")) < 0.6 * os.path.getsize(os.path.join(folder, "model.bin"))
    float_texts = CTranslate2Translator(folder).translate(dates_test).texts
    int8_texts = CTranslate2Translator(int8).translate(dates_test).texts
    # A 32-wide model trained 300 steps has small margins, so 8-bit weights change some digits, not the dates' shape.
    similarity = np.mean([difflib.SequenceMatcher(None, a, b).ratio() for a, b in zip(float_texts, int8_texts)])
    assert similarity > 0.8, list(zip(float_texts, int8_texts))


def test_translator_conventions(trained):
    translator, folder, _ = trained
    engine = CTranslate2Translator(folder)
    result = engine.translate(["", "3 March 1999", "   "])
    assert result.texts[0] == result.texts[2] == "" and result.texts[1] == translator(["3 March 1999"])[0]
    assert engine.languages == (None, None)
    with pytest.warns(UserWarning, match="1 of 1 sentences are longer than max_source_length=40"):
        assert engine.translate(["3 March 1999 " * 20]).truncated == 1
    with pytest.raises(ValueError, match="does not return attention maps"):
        engine.translate(["3 March 1999"], return_attention=True)
    for decoder in (engine, translator):  # CTranslate2 has no position beyond the model's table: refused first
        with pytest.raises(ValueError, match="exceeds the model's maximum length 40. Received: max_length=41"):
            decoder.translate(["3 March 1999"], max_length=41)
    sampled = engine.translate(["3 March 1999", "Tuesday, July 4, 2023"], method="sample", seed=7, top_k=3).texts
    assert all(text[:2] in ("19", "20") for text in sampled)  # a draw among the likeliest pieces: a year first


def test_bad_exports_and_folders(tokenizers, trained, tmp_path):
    translator, folder, _ = trained
    with pytest.raises(ValueError, match="Only Transformer models can be exported to CTranslate2.*Seq2SeqRNN"):
        export_ctranslate2(make_translator(tokenizers, "bahdanau"), str(tmp_path / "rnn"))
    with pytest.raises(FileExistsError, match="already holds a CTranslate2 export"):
        export_ctranslate2(translator, folder)
    (tmp_path / "notes.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="notes.txt is a file; give a folder"):
        export_ctranslate2(translator, str(tmp_path / "notes.txt"), overwrite=True)
    with pytest.raises(FileExistsError, match="is not empty and holds no CTranslate2 export"):
        export_ctranslate2(translator, str(tmp_path), overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "kept"
    with pytest.raises(ValueError, match="`quantization` must be one of .* Received: quantization='int4'"):
        export_ctranslate2(translator, str(tmp_path / "q"), quantization="int4")
    quantized = make_translator(tokenizers, "transformer")
    model_checks.quantize(quantized.model)
    with pytest.raises(ValueError, match=r"quantized \(int8, `Model.quantize`\): export the float model; CTranslate2"):
        export_ctranslate2(quantized, str(tmp_path / "int8"))
    with pytest.raises(FileNotFoundError, match="not a CTranslate2 model folder"):
        CTranslate2Translator(str(tmp_path))
    (tmp_path / "broken").mkdir()
    for name in os.listdir(folder):
        (tmp_path / "broken" / name).write_bytes(b"not a model" if name == "model.bin" else
                                                 open(os.path.join(folder, name), "rb").read())
    with pytest.raises(ValueError, match="CTranslate2 cannot load this model"):
        CTranslate2Translator(str(tmp_path / "broken"))
    metadata = tmp_path / "broken" / "keras_attention.json"
    metadata.write_text(metadata.read_text()[:-10])
    with pytest.raises(ValueError, match=r"keras_attention.json: invalid JSON \(.*\); export the model again"):
        CTranslate2Translator(str(tmp_path / "broken"))


def test_command_line_export_and_translate(trained, tmp_path, capsys):
    translator, _, root = trained
    out = str(tmp_path / "cli-ct2")
    assert main(["export", str(root / "translator"), "--format", "ctranslate2", "-o", out]) == 0
    assert "translate with: keras-attention translate" in capsys.readouterr().out
    sentences = ["3 March 1999", "Tuesday, July 4, 2023"]
    assert main(["translate", out, *sentences, "--engine", "ctranslate2"]) == 0
    assert capsys.readouterr().out.splitlines() == translator(sentences)
    assert main(["translate", out, *sentences, "--engine", "ctranslate2", "--compute-type", "float32"]) == 0
    assert capsys.readouterr().out.splitlines() == translator(sentences)
    assert main(["translate", out, *sentences]) == 2  # our engine, the default, on CTranslate2's folder
    assert "holds a CTranslate2 model (model.bin), not a Keras translator: add --engine ctranslate2" in (
        capsys.readouterr().err)
    for engine in ("keras", "ctranslate2"):
        folder = out if engine == "ctranslate2" else str(root / "translator")
        assert main(["evaluate", folder, "--dataset", "dates", "--max-examples", "30", "--engine", engine]) == 0
    lines = capsys.readouterr().out.splitlines()[-4:]  # each engine's scores, then sacreBLEU's signature
    assert "BLEU" in lines[0] and lines[1].startswith("sacreBLEU signature") and lines[2:] == lines[:2]
    assert main(["export", str(root / "translator"), "--format", "ctranslate2", "-o", out]) == 2
    assert "already holds a CTranslate2 export" in capsys.readouterr().err
    # --overwrite replaces an export, and only an export: never a run or translator folder (the source, here).
    assert main(["export", str(root / "translator"), "--format", "ctranslate2", "-o", out, "--overwrite",
                 "--quantization", "int8"]) == 0
    assert json.loads((tmp_path / "cli-ct2" / "keras_attention.json").read_text())["quantization"] == "int8"
    capsys.readouterr()
    before = sorted(os.listdir(root / "translator"))
    assert main(["export", str(root / "translator"), "--format", "ctranslate2", "-o", str(root / "translator"),
                 "--overwrite"]) == 2
    assert "holds no CTranslate2 export of keras-attention" in capsys.readouterr().err
    assert sorted(os.listdir(root / "translator")) == before
    assert not [p.name for p in tmp_path.iterdir() if "partial" in p.name]  # the replaced export's temporary folder
    assert main(["translate", out, "x", "--engine", "ctranslate2", "--html", str(tmp_path / "a.html")]) == 2
    assert "use --engine keras" in capsys.readouterr().err
