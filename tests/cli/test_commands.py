"""The `keras-attention` command line, end to end on the generated dates corpus."""

import io
import json
import os
import shutil
import sys

import pytest

from keras_attention.cli import main
from tests.conftest import copy_with_languages

pytestmark = pytest.mark.xdist_group("cli_demo")  # one worker: the demo runs once


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    output = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--quick", "--output", str(output)]) == 0
    return output


def test_demo_trains_evaluates_and_saves(demo_dir, capsys):
    assert (demo_dir / "translator" / "model.keras").exists()
    assert (demo_dir / "results.json").exists()
    assert (demo_dir / "history.csv").read_text().startswith("epoch")


def test_the_demo_replaces_only_a_run_it_finished(demo_dir, tmp_path, capsys):
    from keras_attention.cli.demo import _check_folder

    _check_folder(str(demo_dir))  # the run a demo finished: the next demo may replace it
    logged = tmp_path / "logged"  # a folder holding a log only holds no run
    logged.mkdir()
    (logged / "demo.log").write_text("")
    _check_folder(str(logged))
    # A run of the user's own, and one trained since over a demo's (its results changed): kept, and the demo
    # refuses the folder in one line.
    mine = tmp_path / "mine"
    (mine / "translator").mkdir(parents=True)
    (mine / "results.json").write_text("{}")
    retrained = tmp_path / "retrained"
    shutil.copytree(demo_dir, retrained)
    (retrained / "results.json").write_text("{}")
    for folder in (mine, retrained):
        before = sorted(p.name for p in folder.iterdir())
        assert main(["demo", "--quick", "--output", str(folder)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "holds a run that is not one the demo finished there" in err, err
        assert sorted(p.name for p in folder.iterdir()) == before


def test_translate_arguments_and_attention_plot(demo_dir, tmp_path, capsys):
    plot = tmp_path / "attention.png"
    code = main(["translate", str(demo_dir / "translator"), "3 March 1999", "4.7.2023",
                 "--plot-attention", str(plot)])
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert plot.stat().st_size > 1000
    # The map is the first sentence's that is not empty (an empty one has none); with none, a warning.
    after_blank = tmp_path / "after_blank.png"
    assert main(["translate", str(demo_dir / "translator"), " ", "3 March 1999", "--plot-attention",
                 str(after_blank)]) == 0
    assert after_blank.read_bytes() == plot.read_bytes()
    assert main(["translate", str(demo_dir / "translator"), " ", "--plot-attention", str(tmp_path / "no.png")]) == 0
    assert "no attention map to plot" in capsys.readouterr().err and not (tmp_path / "no.png").exists()
    for method in ("greedy", "beam"):  # XLA-compiled decoding prints the same translations
        main(["translate", str(demo_dir / "translator"), "3 March 1999", "4.7.2023", "--method", method])
        plain = capsys.readouterr().out
        assert main(["translate", str(demo_dir / "translator"), "3 March 1999", "4.7.2023", "--method", method,
                     "--jit-compile"]) == 0
        assert capsys.readouterr().out == plain
    assert main(["translate", str(demo_dir / "translator"), "x", "--engine", "ctranslate2", "--jit-compile"]) == 2
    assert "--jit-compile compiles our decoder" in capsys.readouterr().err


def test_explain_and_translate_html_write_the_explorer_page(demo_dir, tmp_path, capsys, monkeypatch):
    # From a run folder and arguments; then from stdin, several sentences on one page.
    page = tmp_path / "page.html"
    assert main(["explain", str(demo_dir), "3 March 1999", "4.7.2023", "-o", str(page), "--method", "beam"]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "3 March 1999" in text and "4.7.2023" in text
    assert "attention explorer" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"1 May 2001\n12/06/1990\n")))
    assert main(["explain", str(demo_dir / "translator"), "-o", str(tmp_path / "stdin.html")]) == 0
    text = (tmp_path / "stdin.html").read_text(encoding="utf-8")
    assert "1 May 2001" in text and "12/06/1990" in text
    # translate --html prints the translations and writes the page of the non-blank sentences.
    html_page = str(tmp_path / "t.html")
    assert main(["translate", str(demo_dir / "translator"), "3 March 1999", "", "--html", html_page]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert "3 March 1999" in (tmp_path / "t.html").read_text(encoding="utf-8")
    # The page shows greedy or beam decoding: sampling with --html is refused before any translation.
    assert main(["translate", str(demo_dir / "translator"), "3 March 1999", "--method", "sample",
                 "--html", str(tmp_path / "s.html")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--html shows the attention of greedy or beam decoding. Received: --method sample" in err
    assert not (tmp_path / "s.html").exists()


def test_translate_stdin_with_bad_bytes(demo_dir, capsys, monkeypatch):
    """Invalid UTF-8 on stdin is replaced and reported, not a traceback; a blank line gives a blank line."""
    stdin = io.TextIOWrapper(io.BytesIO(b"3 March 1999\n12 \xff\xfe mai 1990\n\n  \n4 May 2001\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["translate", str(demo_dir / "translator"), "--method", "beam", "--beam-size", "2"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 5 and lines[2] == lines[3] == "" and lines[0] and lines[4]  # blank in, blank out
    assert "stdin line 2 is not valid UTF-8" in err and "Traceback" not in err


def test_translate_argument_with_bad_bytes(demo_dir, capsys):
    """Non-UTF-8 bytes in a command-line sentence (which Python keeps as lone surrogates in `sys.argv`):
    replaced with a warning, as on stdin."""
    assert main(["translate", str(demo_dir / "translator"), os.fsdecode(b"12 \xff mai 1990"), ""]) == 0
    out, err = capsys.readouterr()
    assert "sentence 1 on the command line is not valid UTF-8" in err and "Traceback" not in err
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0] and lines[1] == ""


def test_evaluate_on_dates(demo_dir, capsys):
    assert main(["evaluate", str(demo_dir / "translator"), "--dataset", "dates", "--split", "valid",
                 "--max-examples", "40"]) == 0
    out = capsys.readouterr().out
    assert "BLEU" in out and "chrF" in out and "40 sentences" in out
    assert "sacreBLEU signature (cased): nrefs:1|case:mixed|eff:no|tok:13a|" in out


def test_evaluate_takes_the_translators_languages_and_refuses_others(demo_dir, tmp_path, capsys):
    # The demo learned dates, which are in no one language: its translator records none.
    config = json.loads((demo_dir / "translator" / "translator.json").read_text())
    assert (config["metadata"]["source_language"], config["metadata"]["target_language"]) == (None, None)
    translator = copy_with_languages(demo_dir / "translator", tmp_path / "translator", "fr", "en")
    assert main(["evaluate", str(translator), "--dataset", "dates", "--split", "valid", "--max-examples", "8",
                 "--source", "fr", "--target", "en"]) == 0  # the translator's own: accepted
    capsys.readouterr()
    assert main(["evaluate", str(translator), "--dataset", "dates", "--source", "de", "--target", "en"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "translates fr->en; --source de contradicts it" in err


def test_evaluate_names_the_test_data_of_a_translator_not_trained_on_multi30k(demo_dir, capsys):
    # The demo's translator learned dates: scoring it on Multi30k, the default, is refused in one line.
    assert main(["evaluate", str(demo_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was trained on the generated dates corpus" in err and "--dataset" in err, err


@pytest.mark.parametrize("trained_on, flags, refused", [
    ("Multi30k en->de", [], False),
    (None, [], False),  # a translator saved without metadata: nothing to go by
    ("parallel files a.en / a.de", ["--dataset", "files", "--test-files", "t.en", "t.de"], False),
    ("parallel files a.en / a.de", ["--dataset", "multi30k"], False),  # asked for
    ("parallel files a.en / a.de", [], "--dataset dates, files, tsv, tfds, wmt14 or prepared, or --dataset multi30k"),
    ("parallel files a.en / a.de", ["--test-files", "t.en", "t.de"], "--dataset files (or tsv) to read the files"),
])
def test_evaluate_scores_multi30k_only_for_what_learned_it_or_when_asked(trained_on, flags, refused):
    from keras_attention.cli.arguments import parse_command_line
    from keras_attention.cli.commands import _check_test_data

    args = parse_command_line(["evaluate", "RUN", *flags])
    metadata = {"dataset": trained_on} if trained_on else {}
    if not refused:
        _check_test_data(args, metadata)
        return
    with pytest.raises(ValueError, match="evaluate scores Multi30k unless --dataset names the test data") as error:
        _check_test_data(args, metadata)
    assert refused in str(error.value)


def test_evaluate_own_test_files_without_training_files(demo_dir, tmp_path, capsys):
    (tmp_path / "t.src").write_text("3 March 1999\n12 May 2001\n")
    (tmp_path / "t.tgt").write_text("1999-03-03\n2001-05-12\n")
    test_files = ["--dataset", "files", "--test-files", str(tmp_path / "t.src"), str(tmp_path / "t.tgt")]
    assert main(["evaluate", str(demo_dir / "translator"), *test_files]) == 0
    out = capsys.readouterr().out
    assert f"parallel files {tmp_path / 't.src'} / {tmp_path / 't.tgt'}, test: BLEU" in out and "None" not in out
    (tmp_path / "t.tsv").write_text("3 March 1999\t1999-03-03\n12 May 2001\t2001-05-12\n")
    assert main(["evaluate", str(demo_dir / "translator"), "--dataset", "tsv", "--test-files",
                 str(tmp_path / "t.tsv")]) == 0  # a TSV test split alone, too
    assert f"TSV file {tmp_path / 't.tsv'}, test: BLEU" in capsys.readouterr().out
    assert main(["train", *test_files, "--output", str(tmp_path / "run")]) == 2
    assert "--dataset files needs --train-files SOURCE TARGET: the training split" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_clear_errors(tmp_path, capsys):
    assert main(["translate", str(tmp_path / "nothing"), "hello"]) == 2
    assert "translator.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--model", "lstm-attention"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'lstm-attention'" in capsys.readouterr().err
    bad_files = ["train", "--dataset", "files", "--train-files", str(tmp_path / "a.en"),
                 str(tmp_path / "a.de"), "--output", str(tmp_path / "run")]
    assert main(bad_files) == 2
    assert "a.en" in capsys.readouterr().err


def test_a_corpus_smaller_than_a_batch_trains_on_partial_batches(tmp_path, capsys):
    command = ["train", "--model", "bahdanau", "--preset", "tiny", "--dataset", "dates", "--vocab-size", "200",
               "--max-length", "32", "--epochs", "1", "--batch-size", "256", "--max-train-examples", "200",
               "--max-test-examples", "8", "--bleu-sample", "0",
               "--jit", "--output", str(tmp_path / "run")]  # XLA: full batches only, unless none is full
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "fills no whole batch of 256 pairs in any length bucket (200 pairs): training on partial" in out
    assert (tmp_path / "run" / "translator" / "model.keras").exists()


def test_results_report_the_start_up(demo_dir):
    import json

    results = json.loads((demo_dir / "results.json").read_text())
    start = results["start_up"]
    assert start["seconds_to_first_step"] > 0 and start["seconds_beyond_median"] >= 0
    shapes = start["batch_shapes"]
    # The quick demo trains without XLA: batches padded to their longest pair, at most a shape each.
    assert 1 <= shapes["train"] <= results["steps_per_epoch"]
    assert shapes["validation"] >= 1


def test_the_xla_cache_is_used_only_when_compiling_and_refused_without_it(tiny_run, tmp_path, monkeypatch, capsys):
    # Which folder each command would keep its XLA programs in (the cache itself: tests/cli/test_quiet.py).
    from keras_attention.cli import commands

    folders = []
    monkeypatch.setattr(commands, "use_xla_cache", folders.append)
    monkeypatch.setattr(commands, "_translate", lambda args: 0)
    translate = ["translate", str(tiny_run / "translator"), "3 March 1999"]
    assert main([*translate, "--jit-compile", "--xla-cache", str(tmp_path / "xla")]) == 0
    assert main([*translate, "--jit-compile"]) == 0
    assert main([*translate, "--jit-compile", "--no-xla-cache"]) == 0
    assert main(translate) == 0
    assert folders == [str(tmp_path / "xla"), None]
    capsys.readouterr()
    for flags in (["--xla-cache", str(tmp_path / "xla")], ["--no-xla-cache"]):
        assert main([*translate, *flags]) == 2
        assert f"{flags[0]} is about XLA's compiled programs" in capsys.readouterr().err
    assert main(["train", "--no-jit", "--xla-cache", str(tmp_path / "xla"), "--output", str(tmp_path / "r")]) == 2
    assert "leave out --no-jit" in capsys.readouterr().err and folders == [str(tmp_path / "xla"), None]
    assert main([*translate, "--compute-type", "int8"]) == 2
    err = capsys.readouterr().err
    assert "--compute-type sets CTranslate2's compute type: add --engine ctranslate2" in err and "int8" in err
    assert main([*translate, "--engine", "ctranslate2", "--xla-cache", str(tmp_path / "xla")]) == 2
    assert "which --engine ctranslate2 does not use: leave --xla-cache out" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_truncations_are_one_line_at_the_end_of_the_command(tiny_run, tmp_path, capsys):
    # The tiny run's translator reads at most 32 source tokens; each of these has more.
    long = " ".join(["Tuesday, 3 March 1999"] * 12)
    assert main(["translate", str(tiny_run / "translator"), long, "4 May 2001", long]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: 2 of 3 translations had a source longer than the translator's max_source_length=32 tokens; "
        "those sources were truncated"]
    # With --html the page's translations count too (the sentences are decoded twice): still one line.
    page = tmp_path / "page.html"
    assert main(["translate", str(tiny_run / "translator"), long, "4 May 2001", "--html", str(page)]) == 0
    warnings_ = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings_ == ["warning: 2 of 4 translations had a source longer than the translator's "
                         "max_source_length=32 tokens; those sources were truncated"]


def test_one_truncation_line_sums_the_warnings_and_others_are_one_line_each(capsys):
    import warnings

    from keras_attention.base.validation import TruncationWarning
    from keras_attention.cli.commands import _one_truncation_line

    with _one_truncation_line():
        warnings.warn(TruncationWarning(2, 10, 24))
        warnings.warn(TruncationWarning(3, 1000, 24))
        warnings.warn("something else,\n  on two lines")
    assert capsys.readouterr().err.splitlines() == [  # the other warning as one line, without Python's source line
        "warning: something else, on two lines",
        "warning: 5 of 1,010 translations had a source longer than the translator's max_source_length=24 tokens; "
        "those sources were truncated"]
