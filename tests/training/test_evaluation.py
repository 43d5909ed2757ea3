import pytest
import sacrebleu

from keras_attention.training.evaluation import corpus_scores, evaluate_bleu, moses_bleu


def test_perfect_and_case_only_differences():
    refs = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee ."]
    perfect = corpus_scores(refs, refs)
    assert perfect["bleu"] == pytest.approx(100.0) and perfect["chrf"] == pytest.approx(100.0)
    lowered = corpus_scores([r.lower() for r in refs], refs)
    assert lowered["bleu_lowercase"] == pytest.approx(100.0)
    assert lowered["bleu"] < 100.0


def test_scores_carry_sacrebleus_signature_of_the_cased_score():
    signature = corpus_scores(["Ein Hund ."], ["Ein Hund ."])["bleu_signature"]
    fields = dict(field.split(":") for field in signature.split("|"))
    assert fields["case"] == "mixed" and fields["tok"] == "13a" and fields["nrefs"] == "1"
    assert fields["version"] == sacrebleu.__version__


def test_unrelated_output_scores_near_zero_and_errors():
    scores = corpus_scores(["x y z w"], ["a b c d"])
    assert scores["bleu"] == pytest.approx(0.0, abs=1e-6) and scores["num_sentences"] == 1
    with pytest.raises(ValueError, match="2 hypotheses, 1 references"):
        corpus_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="0 references"):
        corpus_scores([], [])


def test_evaluate_bleu_batches_and_limits():
    calls = []

    def echo(sentences, method="greedy", **options):
        calls.append(len(sentences))
        return [s.upper() for s in sentences]

    pairs = [(f"a{i} b{i} c{i} d{i} e{i}", f"A{i} B{i} C{i} D{i} E{i}") for i in range(10)]
    result = evaluate_bleu(echo, pairs, batch_size=4, max_examples=9)
    assert calls == [4, 4, 1]
    assert result["bleu"] == pytest.approx(100.0) and len(result["hypotheses"]) == 9


def test_moses_bleu_scores_moses_tokens_lower_cased():
    # Moses splits "It's" into "it 's" and keeps "3-year-old" whole; sacreBLEU's 13a
    # splits at the apostrophe and at every hyphen, so the two figures differ. The
    # expected tokens are written out by hand and scored without further tokenizing.
    hypotheses = ["It's a 3-year-old dog in the park.", "Two MEN, one boat!"]
    references = ["It is a 3-year-old dog in a park.", "Two men in one boat!"]
    by_hand = ["it 's a 3-year-old dog in the park .", "two men , one boat !"]
    references_by_hand = ["it is a 3-year-old dog in a park .", "two men in one boat !"]
    expected = sacrebleu.corpus_bleu(by_hand, [references_by_hand], tokenize="none").score
    assert moses_bleu(hypotheses, references, "en") == pytest.approx(expected)
    assert expected != pytest.approx(corpus_scores(hypotheses, references)["bleu_lowercase"])
    assert moses_bleu(["Ein Hund läuft, oder?"], ["ein Hund läuft , oder ?"], "de") == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses, 1 references"):
        moses_bleu(["a", "b"], ["a"], "en")
