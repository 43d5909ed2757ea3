"""Translator: strings in, strings out, with tokenizers, truncation and saving."""

import json
import os
import warnings

import numpy as np
import pytest

from keras_attention import data
from keras_attention.decoding.translator import Translator
from keras_attention.models import Seq2SeqRNN, Transformer


@pytest.fixture(scope="module")
def tokenizers():
    pairs = data.load_dates(500, "train", seed=3)
    source = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: s), 200)
    target = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: t), 40)
    return source, target


def _translator(tokenizers, kind="transformer", **kwargs):
    source, target = tokenizers
    if kind == "transformer":
        model = Transformer(source.vocab_size, target.vocab_size, num_layers=1, d_model=16,
                            num_heads=2, intermediate_dim=32, max_length=32)
    else:
        model = Seq2SeqRNN(source.vocab_size, target.vocab_size, attention="luong", units=16, embedding_dim=8)
    model((np.ones((1, 4), "int32"), np.ones((1, 3), "int32")))
    return Translator(model, source, target, **{"max_source_length": 24, "max_target_length": 12, **kwargs})


SENTENCES = ["3 March 1999", "Tuesday, July 4, 2023", ""]


@pytest.mark.parametrize("kind", ["transformer", "luong"])
def test_translations_match_direct_greedy_decoding(tokenizers, kind):
    """The strings are the detokenized greedy tokens of the tokenized source."""
    from keras_attention.decoding import greedy_decode

    translator = _translator(tokenizers, kind)
    result = translator.translate(SENTENCES)
    source, target = tokenizers
    ids = [[source.start_id, *source.tokenize(s).numpy().tolist(), source.end_id] for s in SENTENCES[:2]]
    width = max(map(len, ids))
    ids = np.array([row + [0] * (width - len(row)) for row in ids], "int32")
    direct = greedy_decode(translator.model, ids, target.start_id, target.end_id, 12)
    np.testing.assert_array_equal(result.tokens[:2], direct.tokens.numpy())
    expected = [t.decode() for t in target.detokenize(direct.tokens).numpy()]
    assert result.texts == [*expected, ""]  # the empty sentence: empty out, not an invented one
    assert not result.tokens[2].any() and result.scores[2] == 0 and result.scores.shape == (3,)


@pytest.mark.parametrize("method, options", [("greedy", {}), ("beam", {"beam_size": 3}),
                                             ("sample", {"top_k": 3, "seed": 1})])
def test_blank_sentences_give_blank_translations_in_place(tokenizers, method, options):
    translator = _translator(tokenizers)
    result = translator.translate(["  ", "3 March 1999", "", "\t"], method=method,
                                  return_attention=method != "sample", **options)
    alone = translator.translate(["3 March 1999"], method=method, **options)
    assert result.texts == ["", alone.texts[0], "", ""] and result.truncated == 0
    assert result.tokens.shape[0] == 4 and not result.tokens[[0, 2, 3]].any()
    if method != "sample":
        assert result.attention.shape[0] == 4 and not result.attention[[0, 2, 3]].any()
        assert result.source_tokens[0] == [] and result.source_tokens[1][0] == "[START]"
    assert translator(["", " "]) == ["", ""]


def test_methods_attention_and_edge_cases(tokenizers):
    translator = _translator(tokenizers)
    assert translator([]) == []
    assert len(translator("a single string")) == 1
    for method, options in [("beam", {"beam_size": 3}), ("sample", {"top_k": 3, "seed": 1})]:
        assert len(translator(SENTENCES, method=method, **options)) == 3
    result = translator.translate(SENTENCES[:2], return_attention=True)
    assert result.attention.shape[:2] == (2, 12)
    assert result.source_tokens[0][0] == "[START]" and result.source_tokens[0][-1] == "[END]"
    assert len(result.target_tokens[0]) <= 12
    with pytest.raises(ValueError, match="method='nucleus'"):
        translator(SENTENCES, method="nucleus")


def test_long_sources_are_truncated_with_a_warning(tokenizers):
    translator = _translator(tokenizers)
    long = " ".join(["3 March 1999"] * 40)
    with pytest.warns(UserWarning, match="1 of 2 sentences are longer than max_source_length=24"):
        result = translator.translate([long, "3 March 1999"])
    assert result.truncated == 1
    ids, lengths = translator.source_ids([long])
    assert ids.shape[1] == 24 and int(ids[0, -1]) == translator.source_tokenizer.end_id
    assert int(lengths[0]) > 24
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        translator.translate(["3 March 1999"])  # short: no warning


def test_non_utf8_bytes_do_not_crash(tokenizers):
    translator = _translator(tokenizers)
    assert len(translator([b"3 March \xff\xfe 1999", "fine"])) == 2


def test_save_and_load_give_the_same_translations(tokenizers, tmp_path):
    translator = _translator(tokenizers)
    translator.save(str(tmp_path / "t"))
    loaded = Translator.load(str(tmp_path / "t"))
    assert loaded(SENTENCES) == translator(SENTENCES)
    assert loaded.max_source_length == 24 and loaded.target_tokenizer.vocabulary == tokenizers[1].vocabulary
    with pytest.raises(FileNotFoundError, match="translator.json"):
        Translator.load(str(tmp_path / "missing"))


def test_a_quantized_translator_is_refused_by_save_and_nothing_is_written(tokenizers, tmp_path):
    from tests.models import model_checks

    translator = _translator(tokenizers)
    translator.save(str(tmp_path / "t"))
    before = {path.name: path.read_bytes() for path in (tmp_path / "t").iterdir()}
    model_checks.quantize(translator.model)
    with pytest.raises(ValueError, match=r"quantized \(int8, `Model.quantize`\) cannot be saved"):
        translator.save(str(tmp_path / "t"))
    assert {path.name: path.read_bytes() for path in (tmp_path / "t").iterdir()} == before


def test_a_run_folder_loads_its_translator(tokenizers, tmp_path):
    # A run folder of `keras-attention train` holds the translator in translator/, as the command line takes it.
    translator = _translator(tokenizers)
    translator.save(str(tmp_path / "run" / "translator"))
    assert Translator.load(str(tmp_path / "run"))(SENTENCES) == translator(SENTENCES)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"No translator in .*empty"):
        Translator.load(str(tmp_path / "empty"))


def test_the_saved_translator_records_what_it_translates(tokenizers, tmp_path):
    import json

    import keras_attention

    metadata = {"source_language": "en", "target_language": "de", "dataset": "dates"}
    _translator(tokenizers, metadata=metadata).save(str(tmp_path / "t"))
    assert sorted(os.listdir(tmp_path / "t")) == ["model.keras", "translator.json"]  # no temporary file left
    loaded = Translator.load(str(tmp_path / "t"))
    assert loaded.languages == ("en", "de")
    assert loaded.metadata == {**metadata, "keras_attention_version": keras_attention.__version__}
    # A translator.json from before the metadata: loads, with a warning, languages unknown.
    path = tmp_path / "t" / "translator.json"
    config = json.loads(path.read_text())
    del config["metadata"]
    path.write_text(json.dumps(config))
    with pytest.warns(UserWarning, match="older keras-attention"):
        old = Translator.load(str(tmp_path / "t"))
    assert old.languages == (None, None)


def test_a_damaged_translator_folder_is_named_in_one_line(tokenizers, tmp_path):
    folder = tmp_path / "t"
    _translator(tokenizers).save(str(folder))
    model = (folder / "model.keras").read_bytes()
    (folder / "model.keras").write_bytes(model[: len(model) // 2])
    with pytest.raises(ValueError, match=r"model.keras: not a valid Keras archive \(truncated"):
        Translator.load(str(folder))
    (folder / "model.keras").write_bytes(model)
    config = (folder / "translator.json").read_text()
    (folder / "translator.json").write_text(config[:-20])
    with pytest.raises(ValueError, match=r"translator.json: invalid JSON \(line 1: "):
        Translator.load(str(folder))
    (folder / "translator.json").write_text('{"max_source_length": 3}')
    with pytest.raises(ValueError, match="not a translator configuration \\(no source_tokenizer, target_tokenizer"):
        Translator.load(str(folder))
    # Hand-edited values: the file is named, no TypeError from inside.
    for key, value in [("target_tokenizer", "oops"), ("max_source_length", -1),
                       ("source_tokenizer", {**json.loads(config)["source_tokenizer"], "vocabulary": None}),
                       ("source_tokenizer", {**json.loads(config)["source_tokenizer"], "bogus": 1})]:
        (folder / "translator.json").write_text(json.dumps({**json.loads(config), key: value}))
        with pytest.raises(ValueError, match=r"translator.json: .*\(write it again with Translator.save"):
            Translator.load(str(folder))
    # The vocabulary of another run: one token fewer than the model's embedding has rows.
    source = json.loads(config)["source_tokenizer"]
    (folder / "translator.json").write_text(json.dumps({**json.loads(config), "source_tokenizer": {
        **source, "vocabulary": source["vocabulary"][:-1]}}))
    rows = tokenizers[0].vocab_size
    with pytest.raises(ValueError, match=f"translator.json: The model's source vocabulary has {rows} tokens but "
                                         f"the source tokenizer's has {rows - 1}"):
        Translator.load(str(folder))
    os.remove(folder / "model.keras")
    (folder / "translator.json").write_text(config)
    with pytest.raises(FileNotFoundError, match="model.keras: missing"):
        Translator.load(str(folder))


def test_bad_arguments(tokenizers):
    with pytest.raises(ValueError, match="max_target_length=64"):
        _translator(tokenizers, max_target_length=64)  # the model's positions stop at 32
    with pytest.raises(ValueError, match="max_source_length=0"):
        _translator(tokenizers, max_source_length=0)
    source, target = tokenizers
    with pytest.raises(ValueError, match=f"model.target_vocab_size={target.vocab_size}, "
                                         f"target_tokenizer.vocab_size={source.vocab_size}"):
        Translator(_translator(tokenizers).model, source, source)  # the source tokenizer on the target side
    translator = _translator(tokenizers)
    size = translator.target_tokenizer.vocab_size
    with pytest.raises(ValueError, match=f"vocabulary's size, {size}. Received: beam_size={size + 1}"):
        translator.translate(["3 March 1999"], method="beam", beam_size=size + 1)
    assert translator.resolve_options(method="beam", beam_size=size).beam_size == size


def test_decoding_options_are_one_object_however_given(tokenizers):
    from keras_attention.decoding import DecodingOptions

    translator = _translator(tokenizers)
    beam = DecodingOptions(method="beam", beam_size=3, length_penalty=1.0)
    by_object = translator.translate(SENTENCES[:2], beam)
    for same in (translator.translate(SENTENCES[:2], method="beam", beam_size=3, length_penalty=1.0),
                 translator.translate(SENTENCES[:2], "beam", beam_size=3, length_penalty=1.0)):
        assert same.texts == by_object.texts and np.array_equal(same.scores, by_object.scores)
    # A setting the method ignores makes no new decoder (nor a new trace).
    translator(SENTENCES[:2])
    translator(SENTENCES[:2], temperature=0.5, beam_size=7)
    assert len(translator._decoders) == 2  # beam 3, and greedy
    # max_length: fewer output tokens than the translator's 12, never more than the model's 32.
    assert translator.translate(SENTENCES[:2], max_length=4).tokens.shape[1] <= 4
    with pytest.raises(ValueError, match="max_length=40"):
        translator(SENTENCES[:2], DecodingOptions(max_length=40))


def test_several_translators_do_not_warn_of_retracing(tokenizers, caplog):
    # Each Translator traces its decoder once; TensorFlow must not see that as one
    # function retracing (its warning appears after 5 traces of the same code).
    translators = [_translator(tokenizers) for _ in range(7)]
    with caplog.at_level("WARNING", logger="tensorflow"):
        for translator in translators:
            translator(["3 March 1999"])
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]


@pytest.mark.parametrize("kind", ["transformer", "luong"])
def test_xla_compiled_decoding_translates_the_same(tokenizers, kind):
    """jit_compile pads the source to a multiple of 16 tokens and compiles the loop with
    XLA: the same tokens, scores (to rounding) and attention over the real source positions."""
    plain = _translator(tokenizers, kind)
    compiled = Translator(plain.model, *tokenizers, max_source_length=24, max_target_length=12, jit_compile=True)
    sentences = ["3 March 1999", "Tuesday, July 4, 2023", "", "monday 1 jan 2001", "12/31/1999"]
    for method, options in (("greedy", {}), ("beam", {"beam_size": 3})):
        expected = plain.translate(sentences, method, return_attention=True, **options)
        result = compiled.translate(sentences, method, return_attention=True, **options)
        assert result.texts == expected.texts
        np.testing.assert_array_equal(result.tokens, expected.tokens)
        np.testing.assert_allclose(result.scores, expected.scores, rtol=1e-4, atol=1e-4)
        assert result.attention.shape == expected.attention.shape  # cut back from the padded length
        np.testing.assert_allclose(result.attention, expected.attention, atol=1e-4)
    # Sampling is not compiled: the same seed gives the same draws.
    assert compiled(sentences, "sample", seed=3, top_k=3) == plain(sentences, "sample", seed=3, top_k=3)


def test_jit_compile_must_be_a_bool(tokenizers):
    with pytest.raises(ValueError, match="jit_compile='yes'"):
        _translator(tokenizers, jit_compile="yes")
