"""scripts/ab_decoding.py: two commits' decoding in alternated processes, merged into a JSON."""

import json
import sys
from pathlib import Path

import numpy as np

from keras_attention import data
from keras_attention.decoding.translator import Translator
from keras_attention.models import Transformer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import ab_decoding  # noqa: E402


def test_the_same_commit_twice_gives_the_same_translations(tmp_path):
    pairs = data.load_dates(300, "train", seed=3)
    source = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: s), 200)
    target = data.SubwordTokenizer.from_dataset(pairs.map(lambda s, t: t), 40)
    model = Transformer(source.vocab_size, target.vocab_size, num_layers=1, d_model=16, num_heads=2,
                        intermediate_dim=32, max_length=32)
    model((np.ones((1, 4), "int32"), np.ones((1, 3), "int32")))
    Translator(model, source, target, max_source_length=24, max_target_length=12).save(str(tmp_path / "translator"))
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("3 March 1999\nTuesday, July 4, 2023\n12/06/1990\n1 May 2001\n5.7.1980\n",
                         encoding="utf-8")
    out = tmp_path / "decoding.json"
    out.write_text(json.dumps({"rows": [1, 2]}))  # a record already there stays
    record = ab_decoding.main([str(tmp_path), "--before", "HEAD", "--after", "HEAD", "--source", str(sentences),
                               "--sentences", "4", "--batch", "3", "--rounds", "1", "--passes", "1",
                               "--no-xla",  # the script's logic; XLA decoding is tested with the Translator
                               "--json", str(out), "--key", "same_ab"])
    assert [r["variant"] for r in record["rounds"]] == ["before", "after"]
    assert record["greedy_identical"] == "4/4" and record["beam4_identical"] == "4/4"
    assert record["commits"]["before"] == record["commits"]["after"]
    assert record["greedy_ratio_after_over_before"] > 0 and record["xla"] is False
    saved = json.loads(out.read_text())
    assert saved["rows"] == [1, 2] and saved["same_ab"] == record


def test_rounds_alternate_and_the_ratio_is_of_medians(tmp_path, monkeypatch):
    # The processes faked: each reports a speed and its translations (the real ones: the test above).
    speeds = {"before": iter([10.0, 30.0, 20.0]), "after": iter([5.0, 100.0, 15.0])}
    texts = {"before": ["a", "b", "c"], "after": ["a", "b", "d"]}
    dirs = {}

    def fake_child(code_dir, args):
        variant = dirs[code_dir]
        speed = next(speeds[variant])
        return {m: {"sentences_per_second": speed, "first_pass_seconds": 1.0, "texts": texts[variant]}
                for m in ab_decoding.METHODS}

    def fake_export(ref, folder):
        dirs[folder] = ref
        return ref

    monkeypatch.setattr(ab_decoding, "run_child", fake_child)
    monkeypatch.setattr(ab_decoding, "export_commit", fake_export)
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("x\n", encoding="utf-8")
    record = ab_decoding.main([str(tmp_path), "--before", "before", "--after", "after", "--source", str(sentences),
                               "--rounds", "3"])
    assert [r["variant"] for r in record["rounds"]] == ["before", "after", "after", "before", "before", "after"]
    assert record["greedy_median_sentences_per_second"] == {"before": 20.0, "after": 15.0}
    assert record["beam4_ratio_after_over_before"] == 0.75
    assert record["greedy_identical"] == "2/3"
