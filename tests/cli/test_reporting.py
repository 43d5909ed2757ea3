"""The summary printed after `train`: time with its validation share, test scores, examples."""

import contextlib
import io

from keras_attention.cli.reporting import print_summary


def _printed(results):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_summary(results)
    return out.getvalue()


def test_summary_names_the_validation_share_when_recorded():
    results = {"data": "Multi30k en->de", "parameters": 1234567, "train_seconds": 600.4,
               "test": {"bleu": 30.123, "bleu_lowercase": 31.0, "chrf": 55.5, "num_sentences": 1000},
               "examples": [("Ein Hund.", "Ein Hund.")]}
    text = _printed(results)
    assert "parameters: 1,234,567" in text and "training:   600 s\n" in text
    assert "test BLEU:  30.12 (cased, 13a), 31.00 (lower-cased); chrF 55.50 on 1000 sentences" in text
    assert "  reference: Ein Hund.\n  output:    Ein Hund." in text
    text = _printed({**results, "evaluation_seconds": 41.6})
    assert "training:   600 s (42 s of it on the epochs' validation)" in text
    assert "signature" not in text  # results of a run scored before signatures were kept
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    text = _printed({**results, "test": {**results["test"], "bleu_signature": signature}})
    assert f"  sacreBLEU signature (cased): {signature}\n" in text
