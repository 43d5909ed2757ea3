"""BLEU and chrF of a translator on parallel text (sacreBLEU)."""

import itertools

import sacrebleu
from sacrebleu.metrics import BLEU

from keras_attention.base.validation import check_positive_int
from keras_attention.decoding.options import decoding_options


# The scores a run keeps of `corpus_scores` (the recipe's results, the Multi30k script's).
SCORE_KEYS = ("bleu", "bleu_lowercase", "chrf", "num_sentences", "bleu_signature")


def corpus_scores(hypotheses, references):
    """sacreBLEU scores of `hypotheses` against one reference each.

    Returns:
        dict with `bleu` (cased, 13a tokenization: sacreBLEU's default),
        `bleu_lowercase` (the same, lower-cased, the figure most Multi30k
        papers report), `chrf`, `num_sentences`, and `bleu_signature`
        (sacreBLEU's signature of the cased score, which names its settings
        and version; the lower-cased one differs only in `case:lc`).
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            "One hypothesis per reference is needed. Received: "
            f"{len(hypotheses)} hypotheses, {len(references)} references"
        )
    if not references:
        raise ValueError("Cannot score an empty set of sentences. Received: 0 references")
    refs = [list(references)]
    cased = BLEU(tokenize="13a")
    return {
        "bleu": cased.corpus_score(hypotheses, refs).score,
        "bleu_lowercase": BLEU(tokenize="13a", lowercase=True).corpus_score(hypotheses, refs).score,
        "chrf": sacrebleu.corpus_chrf(hypotheses, refs).score,
        "num_sentences": len(references),
        "bleu_signature": str(cased.get_signature()),
    }


def moses_bleu(hypotheses, references, language):
    """Lower-cased BLEU on Moses-tokenized text: the figure fairseq and `multi-bleu.perl` report.

    Papers that train on Moses-tokenized Multi30k (fairseq's recipes among
    them) score tokenized, lower-cased output against tokenized references.
    This computes that figure from plain text, so that it can be compared
    with theirs: both sides go through the Moses tokenizer of `language`
    (`sacremoses`, without XML escaping) and are lower-cased, then
    sacreBLEU scores them with `tokenize="none"`. It is usually higher than
    sacreBLEU's own (13a) figure on the same output; report it labelled.

    Args:
        hypotheses: list of str.
        references: list of str, one per hypothesis.
        language: str. The target language's code ("de", "en", ...).

    Returns:
        float, the BLEU score.

    Example:

    >>> round(moses_bleu(["Ein Hund läuft, oder?"], ["ein hund läuft , oder ?"], "de"), 2)
    100.0
    """
    try:
        from sacremoses import MosesTokenizer
    except ImportError:
        raise ImportError("Moses-tokenized BLEU needs sacremoses: pip install sacremoses "
                          "(in keras-attention's dev extra)") from None
    if len(hypotheses) != len(references):
        raise ValueError(f"One hypothesis per reference is needed. Received: {len(hypotheses)} hypotheses, "
                         f"{len(references)} references")
    tokenizer = MosesTokenizer(lang=language)

    def prepare(text):
        return tokenizer.tokenize(text.lower(), escape=False, return_str=True)

    refs = [[prepare(r) for r in references]]
    # force=True: the text is tokenized on purpose (sacreBLEU would warn that it looks tokenized).
    return sacrebleu.corpus_bleu([prepare(h) for h in hypotheses], refs, tokenize="none", force=True).score


def evaluate_bleu(translator, pairs, options=None, batch_size=64, max_examples=None, **settings):
    """Translate the source side of `pairs` and score it against the target side.

    Args:
        translator: a `Translator` or a `CTranslate2Translator`.
        pairs: an iterable of `(source, target)` strings, or a `tf.data.Dataset`
            of string scalar pairs (as the data loaders return).
        options: a `decoding.DecodingOptions`, or a method name. Defaults to
            None (greedy).
        batch_size: int. Sentences translated at once. Defaults to 64.
        max_examples: int or None. Score only the first ones. Defaults to None.
        **settings: fields of `DecodingOptions` that replace those of `options`
            (`method="beam"`, `beam_size=8`, ...).

    Returns:
        dict: `bleu`, `bleu_lowercase`, `chrf`, `num_sentences`, plus
        `hypotheses` and `references` (lists of str).
    """
    options = decoding_options(options, **settings)
    check_positive_int("batch_size", batch_size)
    if hasattr(pairs, "as_numpy_iterator"):
        pairs = ((s.decode("utf-8"), t.decode("utf-8")) for s, t in pairs.as_numpy_iterator())
    if max_examples is not None:
        pairs = itertools.islice(pairs, check_positive_int("max_examples", max_examples))
    pairs = list(pairs)
    sources = [s for s, _ in pairs]
    references = [t for _, t in pairs]
    hypotheses = []
    for i in range(0, len(sources), batch_size):
        hypotheses += translator(sources[i : i + batch_size], options)
    scores = corpus_scores(hypotheses, references)
    scores.update(hypotheses=hypotheses, references=references)
    return scores
