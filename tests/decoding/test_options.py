"""DecodingOptions: each default written once, checked once, and the same through every entry point."""

import ast
import dataclasses
import pathlib
import re

import pytest

from keras_attention.cli.arguments import parse_command_line
from keras_attention.cli.decoding_flags import options_from_args
from keras_attention.decoding.options import DEFAULTS, EXPORT_DEFAULTS, DecodingOptions, decoding_options
from keras_attention.training.evaluation import evaluate_bleu

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "keras_attention"


def _written_defaults(tree):
    """(name, value) of each constant given to a name in code: keyword arguments, parameter
    defaults, annotated assignments, dict entries and argparse's `default=` beside `--a-flag`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and isinstance(node.value, ast.Constant):
            yield node.arg, node.value.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            pairs = [*zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults),
                     *zip(arguments.kwonlyargs, arguments.kw_defaults)]
            yield from ((a.arg, d.value) for a, d in pairs if isinstance(d, ast.Constant))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(
                node.value, ast.Constant):
            yield node.target.id, node.value.value
        elif isinstance(node, ast.Dict):
            yield from ((k.value, v.value) for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant))
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and str(
                node.args[0].value).startswith("--"):
            for keyword in node.keywords:
                if keyword.arg == "default" and isinstance(keyword.value, ast.Constant):
                    yield node.args[0].value[2:].replace("-", "_"), keyword.value.value


def test_the_defaults_are_the_papers_and_written_nowhere_else():
    assert DEFAULTS == DecodingOptions(method="greedy", beam_size=4, length_penalty=0.6, temperature=1.0,
                                       top_k=None, top_p=None, seed=None, max_length=None)
    assert EXPORT_DEFAULTS == DEFAULTS.replace(method="beam")
    defaults = {f.name: f.default for f in dataclasses.fields(DecodingOptions) if f.default is not None}
    written = [f"{path.relative_to(PACKAGE)}: {name}={value!r}"
               for path in sorted(PACKAGE.rglob("*.py"))
               for name, value in _written_defaults(ast.parse(path.read_text(encoding="utf-8")))
               if name in defaults and value == defaults[name] and type(value) is type(defaults[name])]
    assert written == []


def test_the_scan_finds_a_default_written_again():
    code = ("def translate(s, beam_size=4, *, method='greedy'): pass\n"
            "CONFIG = {'length_penalty': 0.6}\nparser.add_argument('--temperature', default=1.0)\n"
            "f(beam_size=4, top_k=None)\n")
    assert sorted(found for found in _written_defaults(ast.parse(code)) if found[0] != "default") == [
        ("beam_size", 4), ("beam_size", 4), ("length_penalty", 0.6), ("method", "greedy"), ("temperature", 1.0),
        ("top_k", None)]


@pytest.mark.parametrize("changes, words", [
    (dict(method="beams"), "method='beams'"),
    (dict(beam_size=0), "beam_size=0"),
    (dict(beam_size=2.0), "beam_size=2.0"),
    (dict(length_penalty=-1), "length_penalty=-1"),
    (dict(temperature=0), "temperature=0"),
    (dict(top_k=0), "top_k=0"),
    (dict(top_p=0.0), "top_p=0.0"),
    (dict(top_p=1.5), "top_p=1.5"),
    (dict(seed="7"), "seed='7'"),
    (dict(seed=2**31), "must be an integer in [0, 2147483647]. Received: seed=2147483648"),
    (dict(seed=-1), "seed=-1"),
    (dict(length_penalty=1e308), "must be a number in [0, 10]. Received: length_penalty=1e+308"),
    (dict(max_length=0), "max_length=0"),
    (dict(beam_size=None), "beam_size=None"),
])
def test_a_bad_setting_is_refused_by_name(changes, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        DecodingOptions(**changes)
    with pytest.raises(ValueError, match=re.escape(words)):
        DEFAULTS.replace(**changes)  # a copy is checked as a new one is


def test_numpy_settings_are_kept_as_python_numbers():
    import json

    import numpy as np

    options = DecodingOptions(method="sample", temperature=np.float32(0.5), top_k=np.int64(4), seed=np.int32(7))
    assert options == DecodingOptions(method="sample", temperature=0.5, top_k=4, seed=7)
    assert json.loads(json.dumps(dataclasses.asdict(options)))["top_k"] == 4  # what an export's metadata writes


def test_each_method_reads_its_own_settings():
    options = DecodingOptions(method="beam", beam_size=8, temperature=0.5, top_k=3)
    assert options.settings() == {"beam_size": 8, "length_penalty": 0.6}
    assert options.replace(method="sample").settings() == {"temperature": 0.5, "top_k": 3, "top_p": None,
                                                           "seed": None}
    assert options.replace(method="greedy").settings() == {}
    # Settings a method ignores do not make other options: one decoder serves both.
    assert options.used() == DecodingOptions(method="beam", beam_size=8)
    assert DecodingOptions(beam_size=9).used() == DEFAULTS
    assert DecodingOptions(length_penalty=1) == DecodingOptions(length_penalty=1.0)


def test_decoding_options_reads_a_method_name_settings_and_none():
    assert decoding_options() is DEFAULTS
    assert decoding_options("beam") == DecodingOptions(method="beam")
    assert decoding_options("greedy", EXPORT_DEFAULTS) == DecodingOptions()
    beam8 = DecodingOptions(method="beam", beam_size=8)
    assert decoding_options(beam8, length_penalty=1.0) == beam8.replace(length_penalty=1.0)
    assert decoding_options(beam8, beam_size=None, top_k=None) == beam8  # None keeps what `options` has
    with pytest.raises(ValueError, match=r"Unknown decoding settings \['beamsize'\]"):
        decoding_options(beam_size=2, beamsize=3)
    with pytest.raises(ValueError, match="options=4"):
        decoding_options(4)


@pytest.mark.parametrize("argv, defaults", [
    (["translate", "runs/x", "hi"], DEFAULTS),
    (["evaluate", "runs/x"], DEFAULTS),
    (["explain", "runs/x", "hi", "-o", "a.html"], DEFAULTS),
    (["export", "runs/x", "out"], EXPORT_DEFAULTS),
])
def test_the_command_lines_flags_give_the_same_options(argv, defaults):
    assert options_from_args(parse_command_line(argv), defaults) == defaults
    if argv[0] == "translate":
        sample = ["--method", "sample", "--temperature", "0.7", "--top-k", "5", "--top-p", "0.9", "--seed", "11"]
        assert options_from_args(parse_command_line([*argv, *sample])) == DecodingOptions(
            method="sample", temperature=0.7, top_k=5, top_p=0.9, seed=11)
        beam = ["--method", "beam", "--beam-size", "3", "--length-penalty", "1.5"]
        assert options_from_args(parse_command_line([*argv, *beam])) == DecodingOptions(
            method="beam", beam_size=3, length_penalty=1.5)
        # A setting the method would ignore is refused, not dropped in silence.
        with pytest.raises(ValueError, match=r"--beam-size --top-k: settings of --method beam, not of --method "
                                             r"greedy; add --method beam"):
            options_from_args(parse_command_line([*argv, "--beam-size", "8", "--top-k", "3"]))
    if argv[0] == "export":
        args = parse_command_line([*argv, "--method", "greedy", "--max-length", "12"])
        assert options_from_args(args, EXPORT_DEFAULTS) == DecodingOptions(max_length=12)
        args = parse_command_line([*argv, "--beam-size", "2"])  # export's method: beam
        assert options_from_args(args, EXPORT_DEFAULTS) == EXPORT_DEFAULTS.replace(beam_size=2)


def test_each_flags_help_shows_the_options_default():
    from keras_attention.cli.arguments import build_parser

    helps = {name: parser.format_help() for name, parser in build_parser().commands.items()}
    for command in ("translate", "evaluate"):
        help = " ".join(helps[command].split())
        assert f"(default: {DEFAULTS.beam_size})" in help and f"(default: {DEFAULTS.length_penalty})" in help
        assert f"(default: {DEFAULTS.method})" in help and f"(default: {DEFAULTS.temperature})" in help
    assert f"(default: {EXPORT_DEFAULTS.method})" in " ".join(helps["export"].split())


class _Recorder:
    """A translator that records the options it is called with."""

    def __init__(self):
        self.calls = []

    def __call__(self, sentences, options=None, **settings):
        self.calls.append(options)
        return list(sentences)


def test_evaluate_bleu_decodes_with_the_same_defaults():
    pairs = [("a dog runs in the park", "a dog runs in the park"), ("two cats sit on a mat", "two cats sit on a mat")]
    for given, expected in ((None, DEFAULTS), ("beam", DecodingOptions(method="beam")),
                            (DecodingOptions(method="sample", seed=3), DecodingOptions(method="sample", seed=3))):
        translator = _Recorder()
        assert evaluate_bleu(translator, pairs, given)["bleu"] == pytest.approx(100)
        assert translator.calls == [expected]
    translator = _Recorder()
    evaluate_bleu(translator, pairs, method="beam", beam_size=2)  # 0.3's keywords
    assert translator.calls == [DecodingOptions(method="beam", beam_size=2)]


def test_the_package_lists_every_lazy_name_and_loads_options_without_tensorflow():
    import subprocess
    import sys

    import keras_attention.decoding as decoding

    assert sorted(decoding.__all__) == sorted(["DecodingOptions", *decoding._LAZY])
    assert all(getattr(decoding, name) is not None for name in decoding.__all__)
    assert decoding.beam_search.__name__ == "beam_search"  # the function, not a module of that name
    code = "import sys; from keras_attention.decoding import DecodingOptions; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]
