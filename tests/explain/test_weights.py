"""collect_attention: the weights the model itself reports, for every layer and head."""

import numpy as np
import pytest

from keras_attention.explain import collect_attention, explain
from keras_attention.models import Seq2SeqRNN
from tests.explain.explain_helpers import SENTENCES, dates_tokenizers, make_translator


@pytest.fixture(scope="module")
def tokenizers():
    return dates_tokenizers()


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_transformer_weights_match_the_model_for_every_layer_and_head(tokenizers, method):
    translator = make_translator(tokenizers, "transformer", num_layers=2, num_heads=4)
    model = translator.model
    found = collect_attention(translator, SENTENCES, method=method)
    assert [f.source for f in found] == SENTENCES
    for sentence, f in zip(SENTENCES, found):
        reference = translator.translate([sentence], method=method, return_attention=True)
        assert f.translation == reference.texts[0]
        assert f.source_tokens == reference.source_tokens[0] and f.target_tokens == reference.target_tokens[0]
        S, T = len(f.source_tokens), len(f.target_tokens)
        assert f.weights["encoder"].shape == (2, 4, S, S)
        assert f.weights["decoder"].shape == (2, 4, T, T)
        assert f.weights["cross"].shape == (2, 4, T, S)
        # Decoding's own attention (last layer, mean of heads) at each step.
        np.testing.assert_allclose(f.weights["cross"][-1].mean(0), reference.attention[0][:T, :S], atol=1e-5)
        # Encoder: each block's own scores, fed the previous block's output.
        ids = translator.source_ids([sentence])[0]
        x = model.source_embedding(ids)
        for layer, block in enumerate(model.encoder_blocks):
            x, scores = block(x, return_attention_scores=True)
            np.testing.assert_allclose(f.weights["encoder"][layer], np.asarray(scores)[0], atol=1e-5)
        # Causal: nothing above the diagonal; every row a distribution.
        assert np.all(np.triu(f.weights["decoder"], k=1) == 0)
        for kind in ("encoder", "decoder", "cross"):
            np.testing.assert_allclose(f.weights[kind].sum(-1), 1.0, atol=1e-5)
        assert f.decoder_input_tokens[0] == "[START]" and f.decoder_input_tokens[1:] == f.target_tokens[:-1]


def test_decoder_self_attention_is_what_the_block_computes(tokenizers):
    # The block's own self-attention sublayer, called by hand on the same input.
    translator = make_translator(tokenizers, "transformer", num_layers=1, num_heads=2)
    model = translator.model
    f = collect_attention(translator, SENTENCES[0])[0]
    ids = translator.source_ids([SENTENCES[0]])[0]
    encoder_output, _ = model.encode(ids)
    vocabulary = translator.target_tokenizer.vocabulary
    target_in = np.array([[vocabulary.index(t) for t in f.decoder_input_tokens]], "int32")
    y = model.target_embedding(target_in)
    block = model.decoder_blocks[0]
    normed = block.self_attention_norm(y) if block.normalize_first else y
    _, scores = block.self_attention(normed, normed, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_allclose(f.weights["decoder"][0], np.asarray(scores)[0], atol=1e-5)
    # The block returns the same weights when asked, and its outputs do not change.
    out, cross, self_scores = block(y, encoder_output, return_attention_scores=True,
                                    return_self_attention_scores=True)
    np.testing.assert_allclose(np.asarray(self_scores), np.asarray(scores), atol=1e-6)
    np.testing.assert_allclose(np.asarray(out), np.asarray(block(y, encoder_output)), atol=1e-6)


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_rnn_alignment_is_the_decoding_attention(tokenizers, kind):
    translator = make_translator(tokenizers, kind)
    f = collect_attention(translator, SENTENCES[1])[0]
    reference = translator.translate([SENTENCES[1]], return_attention=True)
    T, S = len(f.target_tokens), len(f.source_tokens)
    assert list(f.weights) == ["cross"] and f.weights["cross"].shape == (1, 1, T, S)
    np.testing.assert_allclose(f.weights["cross"][0, 0], reference.attention[0][:T, :S], atol=1e-5)


def test_bad_inputs_are_named(tokenizers):
    translator = make_translator(tokenizers, "transformer", num_layers=1)
    with pytest.raises(ValueError, match="sentence 2 is empty"):
        collect_attention(translator, ["3 May 2001", "  "])
    with pytest.raises(ValueError, match="method"):
        collect_attention(translator, ["3 May 2001"], method="sample")
    with pytest.raises(TypeError, match="must be a Translator"):
        collect_attention(translator.model, ["3 May 2001"])
    source, target = tokenizers
    plain = make_translator(tokenizers, "transformer")
    plain.model = Seq2SeqRNN(source.vocab_size, target.vocab_size, attention=None, units=8, embedding_dim=4)
    with pytest.raises(ValueError, match="no attention"):
        collect_attention(plain, ["3 May 2001"])


def test_long_sentences_are_truncated_with_a_warning_and_a_note(tokenizers):
    translator = make_translator(tokenizers, "transformer", num_layers=1, max_source_length=7)
    with pytest.warns(UserWarning, match="truncated"):
        page = explain(translator, ["Tuesday, July 4, 2023", "2001"])
    assert [s.truncated for s in page.sentences] == [True, False]
    assert len(page.sentences[0].source_tokens) == 7
    assert 'class="note"' in page.to_html()


def test_page_size_for_six_layers_eight_heads_and_forty_tokens(tokenizers):
    translator = make_translator(tokenizers, "transformer", num_layers=6, num_heads=8, d_model=32,
                                 max_source_length=64, max_target_length=40)
    sentence = "Tuesday, July 4, 2023 and Wednesday, August 16, 1995 or 12 May 2001"
    f = collect_attention(translator, sentence)[0]
    # Pad to 40x40 so the bound is checked at the size the issue names.
    for kind, (rows, cols) in {"encoder": (40, 40), "decoder": (40, 40), "cross": (40, 40)}.items():
        f.weights[kind] = np.random.default_rng(0).dirichlet(np.ones(cols), size=(6, 8, rows)).astype("float32")
    f.source_tokens = (f.source_tokens * 40)[:40]
    f.target_tokens = f.decoder_input_tokens = (f.target_tokens * 40)[:40]
    from keras_attention.explain import Explanation
    size = len(Explanation([f]).to_html().encode("utf-8"))
    assert 500_000 < size < 2_000_000, size


def test_save_needs_an_existing_folder(tokenizers, tmp_path):
    page = explain(make_translator(tokenizers, "transformer", num_layers=1), ["3 May 2001"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        page.save(str(tmp_path / "missing" / "page.html"))
    path = page.save(str(tmp_path / "page.html"))
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<!DOCTYPE html>") and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert page._repr_html_().startswith('<div class="ka-explain"')


@pytest.mark.parametrize("kind", ["transformer", "luong"])
def test_without_scripts_the_page_shows_the_strongest_alignments(tokenizers, kind):
    """The fallback a viewer that strips scripts shows: for each output piece, the source piece of largest
    weight in the last layer's mean of the heads; the interactive part stays hidden until its script runs."""
    import html
    import re

    page = explain(make_translator(tokenizers, kind), SENTENCES)
    fragment = page._repr_html_()
    static = fragment[fragment.index('<div class="static">'):fragment.index('<div class="interactive" hidden>')]
    tables = re.findall(r'<table class="strongest">(.*?)</table>', static, re.S)
    assert len(tables) == len(SENTENCES)
    for sentence, table in zip(page.sentences, tables):
        mean = sentence.weights["cross"][-1].mean(axis=0)  # (T, S), by NumPy
        expected = [(out, sentence.source_tokens[row.argmax()], f"{row.max():.2f}")
                    for out, row in zip(sentence.target_tokens, mean)]
        rows = [tuple(html.unescape(cell) for cell in cells)
                for cells in re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", table)]
        assert rows == expected
        assert f"{sentence.source} -> {sentence.translation}" in repr(page)
    assert 'root.querySelector(".static").hidden = true' in fragment
