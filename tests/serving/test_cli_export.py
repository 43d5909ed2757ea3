"""`keras-attention export`, run through `keras_attention.cli.main`."""

import json
import os

import tensorflow as tf

from keras_attention.cli import main
from keras_attention.decoding.translator import Translator


def test_cli_exports_a_saved_translator(translator, tmp_path, capsys):
    saved = str(tmp_path / "translator")
    translator.save(saved)
    base = str(tmp_path / "served")
    assert main(["export", saved, base, "--method", "greedy", "--max-length", "12"]) == 0
    assert f"exported: {os.path.join(base, '1')}" in capsys.readouterr().out
    with open(os.path.join(base, "1", "assets.extra", "keras_attention.json")) as f:
        assert json.load(f)["max_length"] == 12
    translate = tf.saved_model.load(os.path.join(base, "1")).signatures["serving_default"]
    sentences = ["A dog runs in the park.", "", "Two women sit on a bench."]
    short = Translator(translator.model, translator.source_tokenizer, translator.target_tokenizer,
                       translator.max_source_length, max_target_length=12)
    out = translate(sentences=tf.constant(sentences))
    assert [t.decode("utf-8") for t in out["translations"].numpy()] == short(sentences)

    assert main(["export", saved, base, "--method", "greedy", "--jit-compile"]) == 0
    assert "compiled with XLA" in capsys.readouterr().out
    with open(os.path.join(base, "2", "assets.extra", "keras_attention.json")) as f:
        assert json.load(f)["jit_compile"] is True
    assert main(["export", saved, "-o", str(tmp_path / "ct2"), "--format", "ctranslate2", "--jit-compile"]) == 2
    assert "--jit-compile applies to --format savedmodel" in capsys.readouterr().err
    # A flag of the other format is refused, not ignored; nothing is written.
    assert main(["export", saved, "-o", str(tmp_path / "ct2"), "--format", "ctranslate2", "--method", "greedy",
                 "--beam-size", "3"]) == 2
    assert "--method, --beam-size apply to --format savedmodel only" in capsys.readouterr().err
    assert main(["export", saved, base, "--quantization", "int8", "--overwrite"]) == 2
    assert "--quantization, --overwrite apply to --format ctranslate2 only." in capsys.readouterr().err
    assert sorted(os.listdir(base)) == ["1", "2"] and not (tmp_path / "ct2").exists()

    # Errors give a message and exit status 2, not a traceback.
    assert main(["export", str(tmp_path / "missing"), base]) == 2
    assert "translator.json" in capsys.readouterr().err
