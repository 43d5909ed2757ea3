"""Numeric options: one table of ranges, the same refusal from the command line and from Python."""

import pytest

from keras_attention.cli.arguments import build_parser as _parser
from keras_attention.base.options import RANGES, Range, check_option
from keras_attention.training.recipe import TrainConfig


@pytest.mark.parametrize("allowed, inside, outside, words", [
    (Range(int, 1), [1, 7], [0, -1, 1.5, True, None], "an integer >= 1"),
    (Range(float, 0, low_open=True), [1e-9, 3], [0, -1e-3, float("nan"), float("inf")], "a number > 0"),
    (Range(float, 0, 1, high_open=True), [0, 0.5], [1, 1.2, -0.1], "a number in [0, 1)"),
    (Range(float, 0, 1, low_open=True), [1, 0.1], [0, 1.01], "a number in (0, 1]"),
])
def test_ranges(allowed, inside, outside, words):
    assert allowed.describe() == words
    assert all(allowed.contains(v) for v in inside)
    assert not any(allowed.contains(v) for v in outside)


@pytest.mark.parametrize("argv, message", [
    (["train", "--epochs", "0"], "argument --epochs: must be an integer >= 1. Received: 0"),
    (["train", "--epochs", "-1"], "argument --epochs: must be an integer >= 1. Received: -1"),
    (["train", "--epochs", "two"], "argument --epochs: must be an integer >= 1. Received: 'two'"),
    (["train", "--learning-rate", "-1"], "argument --learning-rate: must be a number > 0. Received: -1"),
    (["train", "--label-smoothing", "1"], "argument --label-smoothing: must be a number in [0, 1). Received: 1"),
    (["train", "--batch-size", "0"], "argument --batch-size: must be an integer >= 1"),
    (["train", "--max-ratio", "0.5"], "argument --max-ratio: must be a number >= 1"),
    (["prepare", "--output", "x", "--shard-size", "0"], "argument --shard-size: must be an integer >= 1"),
    (["translate", "t", "x", "--top-p", "0"], "argument --top-p: must be a number in (0, 1]. Received: 0"),
    (["translate", "t", "x", "--temperature", "nan"], "argument --temperature: must be a number > 0"),
    (["export", "t", "out", "--beam-size", "0"], "argument --beam-size: must be an integer >= 1"),
    (["evaluate", "t", "--max-examples", "0"], "argument --max-examples: must be an integer >= 1. Received: 0"),
    (["train", "--dropout", "1"], "argument --dropout: must be a number in [0, 1). Received: 1"),
    (["train", "--attention-dropout", "-0.1"], "argument --attention-dropout: must be a number in [0, 1)"),
    (["train", "--num-layers", "0"], "argument --num-layers: must be an integer >= 1. Received: 0"),
    (["train", "--d-model", "12.5"], "argument --d-model: must be an integer >= 1. Received: '12.5'"),
    (["train", "--time-limit", "0"], "argument --time-limit: must be a number > 0. Received: 0"),
])
def test_the_command_line_names_option_value_and_range(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_python_refuses_with_the_same_words():
    with pytest.raises(ValueError, match=r"^`epochs` must be an integer >= 1. Received: epochs=0$"):
        TrainConfig.from_flat(epochs=0)
    with pytest.raises(ValueError, match=r"`learning_rate` must be a number > 0. Received: learning_rate=-1"):
        TrainConfig.from_flat(learning_rate=-1)
    with pytest.raises(ValueError, match=r"`label_smoothing` must be a number in \[0, 1\)"):
        TrainConfig.from_flat(label_smoothing=1.0)
    TrainConfig.from_flat(learning_rate=None, batch_tokens=None, warmup_steps=0, keep_checkpoints=0)  # optional ones
    assert check_option("top_k", None) is None


def test_every_range_is_used_by_some_flag():
    flags = set()
    parser = _parser()
    for action in parser.commands.values():
        flags |= {a.dest.removeprefix("decoding_") for a in action._actions
                  if getattr(a.type, "__name__", None) == a.dest.removeprefix("decoding_")}
    assert flags == set(RANGES) - {"target_vocab_size"}  # Python only


def test_layers_models_and_decoding_use_the_same_words():
    import numpy as np

    from keras_attention.layers import TransformerEncoder
    from keras_attention.models import Transformer

    with pytest.raises(ValueError, match=r"^`num_heads` must be an integer >= 1. Received: num_heads=0$"):
        TransformerEncoder(num_heads=0, intermediate_dim=8)
    with pytest.raises(ValueError, match=r"`num_layers` must be an integer >= 1. Received: num_layers=-2"):
        Transformer(10, 10, num_layers=-2)
    from keras_attention.decoding import beam_search

    model = Transformer(12, 12, num_layers=1, d_model=8, num_heads=2, intermediate_dim=8, max_length=8)
    model((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    with pytest.raises(ValueError, match=r"`beam_size` must be an integer >= 1. Received: beam_size=0"):
        beam_search(model, np.ones((1, 3), "int32"), start_id=2, end_id=3, max_length=4, beam_size=0)


def test_the_presets_named_for_the_command_line_are_the_ones_models_build():
    from keras_attention.models import PRESETS
    from keras_attention.models.seq2seq_rnn import RNN_PRESETS
    from keras_attention.base.options import PRESET_NAMES

    assert tuple(PRESETS) == tuple(RNN_PRESETS) == PRESET_NAMES


def test_dropout_flags_reach_the_model():
    from keras_attention.cli.configs import config_from_args

    args = _parser().parse_args(["train", "--dropout", "0.3", "--attention-dropout", "0.1"])
    assert config_from_args(args).model.overrides == {"dropout": 0.3, "attention_dropout": 0.1}
    assert config_from_args(_parser().parse_args(["train"])).model.overrides == {}
    args = _parser().parse_args(["train", "--model", "luong", "--attention-dropout", "0.1"])
    with pytest.raises(ValueError, match="--attention-dropout is for the Transformer.*--model luong"):
        config_from_args(args)


def test_bleu_sample_flag_reaches_the_run_config():
    from keras_attention.cli.configs import config_from_args

    assert config_from_args(_parser().parse_args(["train", "--bleu-sample", "0"])).run.bleu_sample == 0
    assert config_from_args(_parser().parse_args(["train"])).run.bleu_sample == TrainConfig().run.bleu_sample


def test_size_flags_reach_the_transformer():
    from keras_attention.cli.configs import config_from_args
    from keras_attention.models import Transformer

    args = _parser().parse_args(["train", "--preset", "tiny", "--num-layers", "4", "--d-model", "64",
                                 "--num-heads", "2", "--intermediate-dim", "96"])
    overrides = config_from_args(args).model.overrides
    assert overrides == {"num_layers": 4, "d_model": 64, "num_heads": 2, "intermediate_dim": 96}
    model = Transformer.from_preset("tiny", 50, 60, **overrides)
    assert (len(model.encoder_blocks), len(model.decoder_blocks), model.d_model) == (4, 4, 64)
    assert model.get_config()["intermediate_dim"] == 96 and model.get_config()["num_heads"] == 2
    args = _parser().parse_args(["train", "--model", "bahdanau", "--num-layers", "2", "--d-model", "64"])
    with pytest.raises(ValueError, match="--num-layers, --d-model: sizes of the Transformer.*--model bahdanau"):
        config_from_args(args)


@pytest.mark.parametrize("flags, expected", [([], "auto"), (["--jit"], True), (["--no-jit"], False)])
def test_the_xla_flags_reach_the_config(flags, expected):
    from keras_attention.cli.configs import config_from_args

    assert config_from_args(_parser().parse_args(["train", *flags])).optimization.jit_compile == expected


@pytest.mark.parametrize("flags, dropout, rows", [([], True, True), (["--no-cpu-dropout"], False, True),
                                                  (["--no-cpu-rows"], True, False)])
def test_each_cpu_switch_has_its_own_flag(flags, dropout, rows):
    from keras_attention.cli.configs import config_from_args

    config = config_from_args(_parser().parse_args(["train", *flags]))
    assert (config.model.cpu_dropout, config.model.cpu_rows) == (dropout, rows)


def test_jit_and_no_jit_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["train", "--jit", "--no-jit"])
    assert "argument --no-jit: not allowed with argument --jit" in capsys.readouterr().err


@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_jit_compile_is_true_false_or_auto(value):
    message = rf"`jit_compile` must be True, False or \"auto\". Received: jit_compile={value!r}"
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_flat(jit_compile=value)


def test_the_bucket_method_flag_reaches_the_config():
    from keras_attention.cli.configs import config_from_args

    assert config_from_args(_parser().parse_args(["train"])).optimization.bucket_method == "equal_count"
    args = _parser().parse_args(["train", "--bucket-method", "min_padding"])
    assert config_from_args(args).optimization.bucket_method == "min_padding"
    with pytest.raises(SystemExit):  # argparse names the choices in one line
        _parser().parse_args(["train", "--bucket-method", "fewest"])


def test_the_time_limit_flag_reaches_the_config():
    from keras_attention.cli.configs import config_from_args

    assert config_from_args(_parser().parse_args(["train"])).optimization.time_limit_minutes is None
    limited = config_from_args(_parser().parse_args(["train", "--time-limit", "88.5"]))
    assert limited.optimization.time_limit_minutes == 88.5
