"""The command line reads options and positional arguments in any order, and --verbose after the command."""

import pytest

from keras_attention.cli import main
from keras_attention.cli.arguments import parse_command_line
from keras_attention.cli.decoding_flags import options_from_args
from keras_attention.decoding import DecodingOptions


def test_a_sentence_after_an_option_is_a_sentence():
    args = parse_command_line(["translate", "runs/x", "--beam-size", "8", "A dog runs.", "--method", "beam", "B"])
    assert (args.command, args.translator, args.sentences) == ("translate", "runs/x", ["A dog runs.", "B"])
    assert options_from_args(args) == DecodingOptions(method="beam", beam_size=8)
    args = parse_command_line(["explain", "runs/x", "-o", "a.html", "x"])
    assert (args.output, args.sentences) == ("a.html", ["x"])
    args = parse_command_line(["average-checkpoints", "a.h5", "--output", "o.h5", "b.h5"])
    assert args.checkpoints == ["a.h5", "b.h5"]


@pytest.mark.parametrize("argv, files", [
    (["evaluate", "--dataset", "files", "--test-files", "a.en", "a.de", "runs/x", "--split", "test"],
     ["a.en", "a.de"]),
    (["evaluate", "--test-files", "t.tsv", "runs/x", "--dataset=tsv"], ["t.tsv"]),  # tsv: one file
    (["evaluate", "--dataset", "files", "--test-files", "t.tsv", "runs/x", "--dataset", "tsv"], ["t.tsv"]),  # the last
    (["evaluate", "--test-file", "t.tsv", "runs/x", "--datas", "tsv"], ["t.tsv"]),  # argparse's abbreviations
    (["evaluate", "runs/x", "--test-files", "a.en", "a.de"], ["a.en", "a.de"]),
])
def test_a_files_option_takes_its_own_words_only(argv, files):
    args = parse_command_line(argv)
    assert (args.translator, args.test_files) == ("runs/x", files)


def test_a_third_file_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as stopped:  # a command with a positional argument: the parser names it
        parse_command_line(["evaluate", "runs/x", "--dataset", "files", "--test-files", "a.en", "a.de", "b.de"])
    assert stopped.value.code == 2 and "unrecognized arguments: b.de" in capsys.readouterr().err
    # train has none: its files option keeps every word, and the configuration's check names them all.
    train = parse_command_line(["train", "--train-files", "a.en", "a.de", "b.de"])
    assert train.train_files == ["a.en", "a.de", "b.de"]


@pytest.mark.parametrize("argv", [["--verbose", "translate", "runs/x", "hi"],
                                  ["translate", "runs/x", "hi", "--verbose"]])
def test_verbose_before_or_after_the_command(argv):
    args = parse_command_line(argv)
    assert args.verbose and args.sentences == ["hi"]
    assert not parse_command_line(["translate", "runs/x", "hi"]).verbose


def test_the_old_order_still_parses_and_verbose_is_in_each_help():
    args = parse_command_line(["--verbose", "translate", "--beam-size", "2", "runs/x", "hi"])
    assert (args.verbose, args.decoding_beam_size, args.sentences) == (True, 2, ["hi"])
    assert "--verbose" in _commands()["translate"].format_help()


def test_after_a_double_dash_every_word_is_a_sentence():
    args = parse_command_line(["translate", "runs/x", "--", "--verbose", "-x"])
    assert args.sentences == ["--verbose", "-x"] and not args.verbose


def test_a_usage_error_names_the_commands_own_help(capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_command_line(["translate", "runs/x", "--beam-sise", "8"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err == ("keras-attention translate: error: unrecognized arguments: --beam-sise 8; did you mean "
                   "--beam-size? (see keras-attention translate --help)\n")


def test_without_a_command_the_program_answers(capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_command_line(["--verbose"])
    assert stopped.value.code == 2 and "(see keras-attention --help)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        parse_command_line(["--version"])
    assert stopped.value.code == 0 and capsys.readouterr().out.startswith("keras-attention ")


def test_main_takes_a_sentence_after_an_option(tmp_path, capsys):
    # The sentence no longer stops the parser: the command goes on to find no translator there.
    missing = str(tmp_path / "no-run")
    assert main(["translate", missing, "--beam-size", "8", "A dog runs."]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-attention translate: error: No translator in") and "unrecognized" not in err


def _commands():
    from keras_attention.cli.arguments import build_parser

    return build_parser().commands


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_example_in_a_help_is_printed_whole_and_parses(name):
    import shlex

    text = _commands()[name].format_help()
    examples = [line.strip() for line in text.split("examples:\n", 1)[1].splitlines() if line.strip()]
    assert examples and all(line.startswith(f"keras-attention {name} ") for line in examples), text
    for line in examples:
        words = shlex.split(line.split(" < ")[0])  # the shell's redirection is not the program's
        args = parse_command_line(words[1:])
        assert args.command == name


def test_train_and_prepare_flags_default_to_the_python_apis_defaults():
    from keras_attention.training.config import TrainConfig

    defaults = TrainConfig().flat()
    fields = set(defaults)
    for command in ("train", "prepare"):
        actions = [a for a in _commands()[command]._actions if a.dest in fields]
        assert len(actions) > 15
        # None: resolved when the run starts (the dataset from --data-dir, the languages from the corpus).
        differ = [(a.dest, a.default, defaults[a.dest]) for a in actions
                  if a.default is not None and a.default != defaults[a.dest]]
        assert differ == [], command
        assert {a.dest for a in actions if a.default is None and defaults[a.dest] is not None} <= {
            "dataset", "source", "target"}


def test_every_option_says_what_it_does_and_its_default():
    import argparse

    missing = []
    for name, parser in _commands().items():
        formatter = parser.formatter_class(prog=name)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            help = formatter._get_help_string(action)
            shown = action.default is not None and action.default is not False and action.default != argparse.SUPPRESS
            if not action.help or (shown and "default:" not in help):
                missing.append(f"{name} {action.option_strings[-1]}")
    assert missing == []
    translate = " ".join(_commands()["translate"].format_help().split())
    assert "--beam-size SIZE beam: hypotheses kept per sentence (default: 4)" in translate


def test_each_export_flag_of_one_format_is_known_as_such():
    # Read from the flags' help notes: a reworded help must not drop a flag from the check of the other format.
    tables = parse_command_line(["export", "run", "-o", "out"]).format_flags
    assert tables == {
        "savedmodel": {"decoding_method": "--method", "decoding_beam_size": "--beam-size",
                       "decoding_length_penalty": "--length-penalty", "decoding_max_length": "--max-length",
                       "jit_compile": "--jit-compile", "version": "--version"},
        "ctranslate2": {"quantization": "--quantization", "overwrite": "--overwrite"},
    }


@pytest.mark.parametrize("typo, suggestion", [("--bem-size", "--beam-size"), ("--lenght-penalty", "--length-penalty"),
                                              ("--xyz", None)])
def test_a_misspelt_flag_gets_the_closest_one(typo, suggestion, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_command_line(["translate", "runs/x", "hi", typo, "4"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"unrecognized arguments: {typo} 4" in err
    assert (f"; did you mean {suggestion}?" in err) if suggestion else "did you mean" not in err
