"""The Multi30k results table: rendered from the runs' JSON alone, and rows whose recipe changed are marked."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import results_common  # noqa: E402
import results_multi30k  # noqa: E402


def test_the_multi30k_table_says_what_was_not_scored(tmp_path, monkeypatch):
    runs = tmp_path / "benchmarks" / "multi30k"
    runs.mkdir(parents=True)
    scores = {"bleu": 30.04, "bleu_lowercase": 30.55, "chrf": 55.0, "num_sentences": 1000}
    for model, direction in results_multi30k.MULTI30K_RUNS:
        result = {"config": {"preset": "small", "epochs": 12}, "test": scores, "train_seconds": 600.0,
                  "parameters": 1234, "commit": "abc1234"}
        if model == "transformer":
            result["test_beam4"] = {**scores, "bleu": 31.0}
        (runs / f"{model}-{direction}.json").write_text(json.dumps(result))
    monkeypatch.setattr(results_common, "ROOT", str(tmp_path))
    monkeypatch.setattr(results_multi30k, "current_recipes", dict)  # these made-up runs follow no recipe
    table = results_multi30k.multi30k()
    assert ("| `transformer` | transformer (small) | en->de | 12 | 30.0 / 30.6 | 31.0 / 30.6 | not scored | 55.0 "
            "| 10 min | 1,234 | abc1234 |") in table
    assert table.count("| RNN without attention (small) |") == 2 and table.count("not scored") == 14
    assert "Moses" not in table  # no run has fairseq's measure: no column for it
    assert ("the runs recorded no sacreBLEU signature; all were scored as `nrefs:1|case:mixed|eff:no|tok:13a|"
            "smooth:exp` by sacreBLEU 2.3 or later") in table

    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    averaged = {**scores, "bleu": 32.0, "bleu_moses_lowercase": 33.449, "bleu_signature": signature}
    result = json.loads((runs / "transformer-de-en.json").read_text())
    (runs / "transformer-de-en.json").write_text(json.dumps({**result, "test_average_beam4": averaged}))
    table = results_multi30k.multi30k()
    assert ("| `transformer` | transformer (small) | de->en | 12 | 30.0 / 30.6 | 31.0 / 30.6 | 32.0 / 30.6 | 33.4 "
            "| 55.0 |") in table
    assert "| the same, lower-cased on Moses tokens |" in table and table.count("not scored") == 13 + 7
    assert (f"sacreBLEU signature `{signature}`, lower-cased `case:lc`; the 7 runs that recorded none were "
            "scored as `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp` by") in table

    # A variant of a recipe (its own JSON) gets its row after the recipe's, named by its settings.
    variant = {**result, "config": {"model": "transformer", "preset": "small", "epochs": 9, "share_embeddings": True}}
    (runs / "transformer-shared-en-de.json").write_text(json.dumps(variant))
    lines = results_multi30k.multi30k().splitlines()
    names = [" | ".join(line.split(" | ")[:3]) for line in lines if line.startswith("| `transformer")]
    assert names == ["| `transformer` | transformer (small) | en->de",
                     "| `transformer-shared` | transformer (small), one vocabulary, shared embeddings | en->de",
                     "| `transformer` | transformer (small) | de->en"]
    assert "(*)" not in "\n".join(lines)
    sized = {**result, "config": {"model": "transformer", "preset": "tiny", "epochs": 50,
                                  "overrides": {"num_layers": 4, "intermediate_dim": 256, "dropout": 0.3}}}
    (runs / "transformer-tiny-en-de.json").write_text(json.dumps(sized))
    row = "| `transformer-tiny` | transformer (tiny, 4 layers a side, feed-forward 256) | en->de | 50 |"
    assert row in results_multi30k.multi30k()
    assert "time limit" not in results_multi30k.multi30k()
    limited = {**sized, "time_limit": {"minutes": 88.0, "stopped_after_epoch": 47}}
    (runs / "transformer-tiny-en-de.json").write_text(json.dumps(limited))
    table = results_multi30k.multi30k()
    assert row.replace("| 50 |", "| 47 of 50 |") in table and "(`train --time-limit`, 88 minutes" in table
    (runs / "transformer-tiny-en-de.json").write_text(json.dumps({**limited, "time_limit": {
        "minutes": 88.0, "stopped_after_epoch": None}}))  # every epoch fitted
    assert row in results_multi30k.multi30k()
    (runs / "transformer-tiny-en-de.json").unlink()
    (runs / "transformer-shared-en-de.json").write_text(json.dumps({**variant, "train_seconds": 5700.0,
                                                                   "evaluation_seconds": 330.0}))
    assert "| 95 min, 6 validating |" in results_multi30k.multi30k()  # 5700 s, of them 330 s on validation
    lower = {**variant, "config": {**variant["config"], "lower_case": True}}
    (runs / "transformer-shared-en-de.json").write_text(json.dumps(lower))
    # Trained lower-cased: its cased BLEU (of lower-case output) is not shown.
    assert "trained lower-cased | en->de | 9 | - / 30.6 | - / 30.6 | not scored | not scored | 55.0 |" \
        in results_multi30k.multi30k()
    (runs / "transformer-shared-en-de.json").write_text(json.dumps({**variant, "note": "stopped after epoch 9"}))
    table = results_multi30k.multi30k()  # a run made otherwise than by the command is marked and told
    assert table.count("(*)") == 2 and "| abc1234 (*) |" in table and "has a `note`" in table


def test_a_row_trained_before_its_recipe_changed_is_marked(tmp_path, monkeypatch):
    runs = tmp_path / "benchmarks" / "multi30k"
    runs.mkdir(parents=True)
    scores = {"bleu": 30.04, "bleu_lowercase": 30.55, "chrf": 55.0, "num_sentences": 1000}
    recipe = {"epochs": 12, "vocab_size": 10000, "time_limit_minutes": 88, "overrides": {"dropout": 0.3}}
    for model, direction in results_multi30k.MULTI30K_RUNS:
        config = {"preset": "small", "epochs": 12, "vocab_size": 10000, "time_limit_minutes": 88,
                  "overrides": {"dropout": 0.3}}
        if (model, direction) == ("bahdanau", "de-en"):  # an older run: another vocabulary, no time limit
            config = {**config, "vocab_size": 8000}
            del config["time_limit_minutes"]
        result = {"config": config, "test": scores, "train_seconds": 600.0, "parameters": 1234, "commit": "abc1234"}
        (runs / f"{model}-{direction}.json").write_text(json.dumps(result))
    monkeypatch.setattr(results_common, "ROOT", str(tmp_path))
    current_recipes = results_multi30k.current_recipes
    monkeypatch.setattr(results_multi30k, "current_recipes",
                        lambda: {(model, direction): recipe for model in ("bahdanau", "luong")
                                 for direction in ("en-de", "de-en")})
    table = results_multi30k.multi30k()
    marked = [line for line in table.splitlines() if line.endswith("| abc1234 (†) |")]
    assert len(marked) == 1 and "| bahdanau (small) | de->en |" in marked[0]
    assert ("(†) Made before its recipe changed: the run's settings or scoring differ from what "
            "`scripts/train_multi30k.py` sets now (`bahdanau` de->en: `vocab_size` 8000 (now 10000), "
            "`time_limit_minutes` not set (now 88))." in table)
    # The recipes as the script sets them: the committed rows that match them carry no mark.
    recipes = current_recipes()
    assert recipes["transformer", "de-en"]["epochs"] == 30
    assert recipes["transformer", "en-de"]["dataset"] == "multi30k"
    assert results_multi30k.recipe_changes({**recipes["luong", "en-de"]}, recipes["luong", "en-de"]) == []
    # A setting one direction chose on its own validation set is that direction's recipe only.
    import train_multi30k

    tiny = recipes["transformer-tiny", "en-de"], recipes["transformer-tiny", "de-en"]
    both = train_multi30k.CONFIGS["transformer-tiny"]
    de_en = train_multi30k.DIRECTION_CONFIGS["transformer-tiny", "de-en"]
    assert sorted(results_multi30k.recipe_changes(tiny[0], tiny[1])) == sorted(
        (field, both.get(field), value) for field, value in de_en.items())
    assert both["vocab_size"] != de_en["vocab_size"]

    # A setting the recipe leaves at its default counts too, once the run recorded it.
    defaults = results_multi30k.default_settings()
    lowered = {**recipes["transformer-tiny", "en-de"], "lower_case": True, "cpu_rows": None}
    assert results_multi30k.recipe_changes(lowered, tiny[0], defaults) == [("lower_case", True, False)]


def test_a_run_scored_before_its_recipe_chose_on_validation_is_marked():
    import train_multi30k

    penalties = train_multi30k.LENGTH_PENALTIES["transformer-tiny"]
    counts = train_multi30k.AVERAGE_COUNTS["transformer-tiny"]
    fixed = {"averaged_checkpoints": ["a", "b", "c"], "average_selection": {"chosen": 3}}
    assert results_multi30k.scoring_changes("transformer-tiny", fixed) == [
        ("length_penalty", train_multi30k.BEAM.length_penalty,
         "chosen on validation from " + ", ".join(f"{p:g}" for p in penalties))]
    assert results_multi30k.scoring_changes("transformer-tiny", {"averaged_checkpoints": ["a", "b"]})[0] == (
        "checkpoints averaged", "the last 2", "chosen on validation from " + ", ".join(map(str, counts)))
    chosen = {**fixed, "length_penalty_selection": {"chosen": 1.5}}
    assert results_multi30k.scoring_changes("transformer-tiny", chosen) == []
    assert results_multi30k.scoring_changes("bahdanau", {}) == []  # its recipe chooses neither


def test_the_multi30k_notes_say_what_the_averaged_column_averages():
    five = {"averaged_checkpoints": [f"epoch-{e:03d}.weights.h5" for e in range(8, 13)]}
    chosen = {"averaged_checkpoints": ["epoch-046.weights.h5"] * 10,
              "average_selection": {"split": "val", "measure": "BLEU, lower-cased, greedy", "chosen": 10,
                                    "bleu": {"5": 40.04, "10": 40.51, "15": 40.46, "20": 40.2}}}
    assert results_multi30k.averaged_note([("rnn", "en-de", {}), ("rnn", "de-en", {})]) is None
    assert results_multi30k.averaged_note([("rnn", "en-de", five), ("transformer-tiny", "en-de", chosen)]) == (
        "The averaged column is the mean of the weights of the last 5 epochs; for `transformer-tiny` en->de, of "
        "the last 10: the count that scored best on the validation set (BLEU, lower-cased, greedy: last 5 40.04, "
        "last 10 40.51, last 15 40.46, last 20 40.20). Nothing is chosen on the test set.")


def test_every_size_flag_of_train_has_its_words_in_the_table():
    from keras_attention.cli.arguments import TRANSFORMER_SIZE_FLAGS

    assert set(results_multi30k.SIZE_WORDS) == set(TRANSFORMER_SIZE_FLAGS.values())


def test_the_multi30k_notes_give_a_length_penalty_chosen_on_validation():
    chosen = {"length_penalty_selection": {"split": "val", "measure": "BLEU, lower-cased, beam 4", "chosen": 2.0,
                                           "bleu": {"0.6": 40.86, "1": 41.12, "2": 41.86}}}
    assert results_multi30k.length_penalty_note([("rnn", "en-de", {})]) is None
    assert results_multi30k.length_penalty_note([("rnn", "en-de", {}), ("transformer-tiny", "de-en", chosen)]) == (
        "The beam columns' length penalty is for `transformer-tiny` de->en, 2: the penalty that scored best on the "
        "validation set with the final model (BLEU, lower-cased, beam 4: 0.6 40.86, 1 41.12, 2 41.86). Nothing is "
        "chosen on the test set.")
