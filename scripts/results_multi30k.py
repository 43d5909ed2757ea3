"""The Multi30k results table, from `benchmarks/multi30k/*.json`, and the marks on rows whose recipe changed since.

A row's recipe is what `scripts/train_multi30k.py` sets now (`current_recipes`); a run trained or scored
otherwise is marked (†) and the note under the table says what differs.
"""

import json

from results_common import bleu, exists, load, moses_bleu_cell, training_time

MULTI30K_RUNS = [(m, d) for m in ("transformer", "bahdanau", "luong", "rnn") for d in ("en-de", "de-en")]
# Runs of other recipes, shown after the one they vary once their JSON exists.
MULTI30K_VARIANTS = {"transformer": ["transformer-shared", "transformer-tiny"]}
# How a run's size overrides read in its row's name (one entry for each of `train`'s size flags,
# keras_attention.cli.arguments.TRANSFORMER_SIZE_FLAGS; a test keeps the two in step).
SIZE_WORDS = {"num_layers": "{} layers a side", "d_model": "width {}", "num_heads": "{} heads",
              "intermediate_dim": "feed-forward {}"}


def epochs_cell(results):
    """The epochs column: the epochs asked for, or "N of M" for a run its time limit stopped after epoch N."""
    stopped = (results.get("time_limit") or {}).get("stopped_after_epoch")
    asked = results["config"]["epochs"]
    return f"{stopped} of {asked}" if stopped else f"{asked}"


def current_recipes():
    """`scripts/train_multi30k.py`'s recipes as its runs get them: {(recipe, direction): TrainConfig's flat names}."""
    import train_multi30k  # imports TensorFlow: only when the table is rendered

    return {(name, direction): train_multi30k.recipe(name, direction)
            for name in train_multi30k.CONFIGS for direction in train_multi30k.DIRECTIONS}


# TrainConfig's flat names that name a run rather than set its recipe.
RUN_NAMES = ("source", "target", "output_dir", "resume")


def recipe_changes(config, recipe, defaults=None):
    """The settings of `recipe` (a dict of TrainConfig's flat names) that a run's `config` had otherwise:
    [(name, the run's value or None, the recipe's)], in the recipe's order. With `defaults` (TrainConfig's
    flat defaults), also the settings the recipe leaves at their default that the run set otherwise (a
    setting the run did not record, from before it existed, is not counted)."""
    as_json = json.loads(json.dumps(recipe))  # tuples as lists, as in the run's JSON
    changes = [(name, config.get(name), value) for name, value in as_json.items() if config.get(name) != value]
    for name, value in json.loads(json.dumps(defaults or {})).items():
        if name not in as_json and name not in RUN_NAMES and config.get(name) not in (None, value):
            changes.append((name, config[name], value))
    return changes


def default_settings():
    """TrainConfig's flat defaults: what a recipe that does not name a setting trains with."""
    from keras_attention.training.config import TrainConfig

    return TrainConfig.from_flat(source="en", target="de", output_dir="run").flat()


def scoring_changes(model, results):
    """How `scripts/train_multi30k.py` scores `model` now and a run's `results` were not scored:
    [(what, the run's way, the way now)] (the checkpoints averaged, beam search's length penalty)."""
    import train_multi30k  # as current_recipes

    changes = []
    counts = train_multi30k.AVERAGE_COUNTS.get(model)
    if counts and "average_selection" not in results:
        averaged = len(results.get("averaged_checkpoints") or [])
        changes.append(("checkpoints averaged", f"the last {averaged}" if averaged else None,
                        "chosen on validation from " + ", ".join(map(str, counts))))
    penalties = train_multi30k.LENGTH_PENALTIES.get(model)
    if penalties and "length_penalty_selection" not in results:
        changes.append(("length_penalty", train_multi30k.BEAM.length_penalty,
                        "chosen on validation from " + ", ".join(f"{p:g}" for p in penalties)))
    return changes


def changes_note(changed):
    """The note on rows whose recipe changed after they ran, from [(recipe, direction, changes)]."""
    def setting(name, then, now):
        label = f"`{name}`" if name.isidentifier() else name  # a TrainConfig field or decoding option, or words
        return f"{label} {'not set' if then is None else then} (now {now})"

    rows = "; ".join(f"`{model}` {direction.replace('-', '->')}: " + ", ".join(setting(*c) for c in changes)
                     for model, direction, changes in changed)
    return ("(†) Made before its recipe changed: the run's settings or scoring differ from what "
            f"`scripts/train_multi30k.py` sets now ({rows}). Such a row is that recipe's last run, not yet "
            "re-run with the current one.")


def multi30k():
    import train_multi30k  # as current_recipes

    recipes, defaults = current_recipes(), default_settings()
    changed = []  # (recipe, direction, changes) of rows trained with an earlier version of their recipe
    runs = []
    for model, direction in MULTI30K_RUNS:
        runs.append((model, direction, load(f"multi30k/{model}-{direction}")))
        for variant in MULTI30K_VARIANTS.get(model, []):
            if exists(f"multi30k/{variant}-{direction}"):
                runs.append((variant, direction, load(f"multi30k/{variant}-{direction}")))
    # fairseq's measure, once some run has it (scripts/train_multi30k.py adds it to the scores it computes).
    moses = any("bleu_moses_lowercase" in (r.get("test_average_beam4") or {}) for *_, r in runs)
    lines = ["| recipe | model | direction | epochs | BLEU greedy | BLEU beam 4 "
             + "| BLEU beam 4, last checkpoints averaged "
             + ("| the same, lower-cased on Moses tokens " if moses else "")
             + "| chrF greedy | training time | parameters | commit |",
             "|---|---|---|---:|---:|---:|---:|" + ("---:|" if moses else "") + "---:|---:|---:|---|"]
    for model, direction, r in runs:
        config = r["config"]
        overrides = config.get("overrides") or {}
        sizes = [words.format(overrides[key]) for key, words in SIZE_WORDS.items() if key in overrides]
        size_label = ", ".join([config["preset"]] + sizes)
        name = (f"{config.get('model', model)} ({size_label})" if model != "rnn"
                else f"RNN without attention ({size_label})")
        if config.get("share_embeddings"):
            name += ", one vocabulary, shared embeddings"
        if config.get("lower_case"):
            name += ", trained lower-cased"
        averaged = r.get("test_average_beam4") or {}
        fairseq = f"| {moses_bleu_cell(averaged)} " if moses else ""
        lower = bool(config.get("lower_case"))
        recipe = recipes.get((model, direction))
        changes = (recipe_changes(config, recipe, defaults) if recipe else []) + scoring_changes(model, r)
        if changes:
            changed.append((model, direction, changes))
        lines.append(f"| `{model}` | {name} | {direction.replace('-', '->')} | {epochs_cell(r)} "
                     f"| {bleu(r['test'], lower)} | {bleu(r.get('test_beam4'), lower)} "
                     f"| {bleu(averaged, lower)} {fairseq}"
                     f"| {r['test']['chrf']:.1f} | {training_time(r)} | {r['parameters']:,} "
                     f"| {r.get('commit') or 'not recorded'}{' (*)' if r.get('note') else ''}"
                     f"{' (†)' if changes else ''} |")
    lines += ["", "BLEU is sacreBLEU on test_2016_flickr, cased 13a / lower-cased (a model trained lower-cased has "
              f"only the second; {signature_note(runs)}); beam 4 with the GNMT length penalty "
              f"{train_multi30k.BEAM.length_penalty}"
              f"{' unless said below' if any('length_penalty_selection' in r for *_, r in runs) else ''}. Each row is "
              "`python scripts/train_multi30k.py --models RECIPE --directions SRC-TGT` "
              "(its JSON in `benchmarks/multi30k/`; the script needs the `dev` extra, `pip install -e '.[dev]'`"
              f"{', for the Moses tokenizer of the lower-cased-on-Moses-tokens column' if moses else ''}), "
              "trained on a shared 2-core CPU machine; the rows ran on "
              "different days and hosts (whose speed differed up to 3x), so compare their BLEU, not their minutes. "
              "The training time is the `train` command's own: the epochs' seconds, each epoch with its validation "
              "loss and BLEU on 200 sentences, whose share is given where the run recorded it."]
    limits = sorted({r["time_limit"]["minutes"] for *_, r in runs if r.get("time_limit")})
    if limits:
        lines += ["", f"A run with a time limit (`train --time-limit`, {' or '.join(f'{m:g}' for m in limits)} "
                  "minutes of training, validation excluded) trains its epochs until the next one would end past "
                  "the limit; \"N of M\" in the epochs column means it stopped there."]
    averaged_text = averaged_note(runs)
    if averaged_text:
        lines += ["", averaged_text]
    penalty_text = length_penalty_note(runs)
    if penalty_text:
        lines += ["", penalty_text]
    if any(r.get("note") for *_, r in runs):
        lines += ["", "(*) Not made by that command alone: the run's JSON has a `note` saying how it was made."]
    if changed:
        lines += ["", changes_note(changed)]
    if moses:
        gaps = [abs(s["bleu_moses_lowercase"] - s["bleu_lowercase"]) for *_, r in runs
                for s in [r.get("test_average_beam4") or {}] if "bleu_moses_lowercase" in s]
        lines += ["", "\"Lower-cased on Moses tokens\" scores Moses-tokenized, lower-cased output and references "
                  "with sacreBLEU `tokenize=none` (`keras_attention.training.moses_bleu`): the measure of fairseq's "
                  "and most papers' Multi30k figures, for comparing with them. The two tokenizations split words "
                  "differently only at some punctuation (apostrophes, for one); on the runs above that have both, "
                  f"the two lower-cased figures differ by at most {max(gaps):.2f} BLEU."]
    return "\n".join(lines) + "\n"


def signature_note(runs):
    """sacreBLEU's signatures of the runs' cased scores, and how the runs that recorded none were scored."""
    from keras_attention.training.evaluation import corpus_scores

    signed = {}
    for model, direction, r in runs:
        for scores in (r.get(key) or {} for key in ("test", "test_beam4", "test_average", "test_average_beam4")):
            if "bleu_signature" in scores:
                signed.setdefault(scores["bleu_signature"], set()).add((model, direction))
    unsigned = len({(m, d) for m, d, _ in runs} - set().union(*signed.values()))
    # The settings without the version: the same code has scored every run.
    settings = corpus_scores(["."], ["."])["bleu_signature"].rsplit("|version:", 1)[0]
    if not signed:
        return (f"the runs recorded no sacreBLEU signature; all were scored as `{settings}` by sacreBLEU 2.3 or "
                "later, lower-cased as `case:lc`")
    text = "sacreBLEU signature " + ", ".join(f"`{signature}`" for signature in sorted(signed))
    text += ", lower-cased `case:lc`"
    if unsigned:
        runs_without = (f"the {unsigned} runs that recorded none were" if unsigned > 1
                        else "the run that recorded none was")
        text += f"; {runs_without} scored as `{settings}` by sacreBLEU 2.3 or later"
    return text


def averaged_note(runs):
    """What the averaged column averages (each run's count of last epochs, or the count it chose on validation),
    or None when no run has an average."""
    counts = sorted({len(r["averaged_checkpoints"]) for *_, r in runs
                     if "averaged_checkpoints" in r and "average_selection" not in r})
    chosen = [(m, d, r["average_selection"]) for m, d, r in runs if "average_selection" in r]
    parts = []
    if counts:
        parts.append("the mean of the weights of the last " + " or ".join(map(str, counts)) + " epochs")
    for model, direction, selection in chosen:
        scores = ", ".join(f"last {n} {b:.2f}" for n, b in selection["bleu"].items())
        parts.append(f"for `{model}` {direction.replace('-', '->')}, of the last {selection['chosen']}: the count "
                     f"that scored best on the validation set ({selection['measure']}: {scores})")
    if not parts:
        return None
    return "The averaged column is " + "; ".join(parts) + (". Nothing is chosen on the test set." if chosen else ".")


def length_penalty_note(runs):
    """The length penalty of the beam columns of each run that chose it on the validation set, or None."""
    chosen = [(m, d, r["length_penalty_selection"]) for m, d, r in runs if "length_penalty_selection" in r]
    if not chosen:
        return None
    parts = [f"for `{model}` {direction.replace('-', '->')}, {selection['chosen']:g}: the penalty that scored best "
             f"on the validation set with the final model ({selection['measure']}: "
             + ", ".join(f"{a} {b:.2f}" for a, b in selection["bleu"].items()) + ")"
             for model, direction, selection in chosen]
    return "The beam columns' length penalty is " + "; ".join(parts) + ". Nothing is chosen on the test set."
