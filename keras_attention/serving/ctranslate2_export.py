"""Export a Transformer `Translator` to CTranslate2, a C++ inference engine.

CTranslate2 (https://github.com/OpenNMT/CTranslate2) runs Transformer
translators on CPUs and GPUs with fused kernels and optional 8-bit weights. Its
Python package describes a model as a *spec* (layer by layer: linear weights as
`(out, in)` matrices, layer norms, embeddings, position tables); this module
fills a `TransformerSpec` from the Keras weights of our `Transformer` and lets
CTranslate2 write its model folder. No other framework is involved.

What maps to what (per block):

| ours                                   | CTranslate2                               |
|----------------------------------------|-------------------------------------------|
| query/key/value kernels `(d, N, H)`    | one fused `(3d, d)` linear (self-attention) |
| cross-attention query; key + value     | `linear[0]` `(d, d)`; fused `(2d, d)`     |
| output kernel `(N, H, d)`              | `(d, d)` linear                           |
| `*_norm` (post- or pre-norm)           | the sublayer's `layer_norm`               |
| feed-forward Dense layers              | `ffn.linear_0`, `ffn.linear_1`            |
| positions (sinusoidal or learned)      | an explicit `(max_length, d)` table       |
| tied output (target embedding)         | `decoder.projection`                      |

The folder also holds `keras_attention.json` (our tokenizers and maximum
lengths), so `CTranslate2Translator` can go from sentences to sentences; the
model itself reads and writes token strings and loads with `ctranslate2` alone.

Two details differ from our decoder and are handled here:
- our decoder never emits the padding id 0; CTranslate2 would, so the export
  gives the output projection a bias of `PAD_LOGIT_BIAS` on `[PAD]` (0
  elsewhere, plus the model's own bias if it has one);
- CTranslate2 adds `[START]` and `[END]` to the source itself
  (`add_source_bos`, `add_source_eos`) and starts the target with `[START]`.
"""

import json
import os

import keras
import numpy as np

from keras_attention.base.files import check_replaceable_folder, folder_replaced_atomically, write_json
from keras_attention.base.options import CTRANSLATE2_QUANTIZATIONS
from keras_attention.data.vocabulary import END, PAD, START, UNK
from keras_attention.decoding.translator import Translator, quantization_modes
from keras_attention.models import Transformer

__all__ = ["QUANTIZATIONS", "export_ctranslate2"]

QUANTIZATIONS = CTRANSLATE2_QUANTIZATIONS  # None keeps float32
# Added to the `[PAD]` logit: exp(-1e4) is 0 in float16 and float32 alike.
PAD_LOGIT_BIAS = -1e4
METADATA_FILE = "keras_attention.json"


def require_ctranslate2():
    """The `ctranslate2` module, or one line saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(
            "CTranslate2 is not installed: pip install \"keras-attention[ctranslate2]\" "
            "(or pip install ctranslate2)"
        ) from None
    return ctranslate2


def export_ctranslate2(translator, output_dir, quantization=None, overwrite=False):
    """Write `translator`'s Transformer as a CTranslate2 model folder.

    Args:
        translator: a `decoding.Translator` whose model is a `models.Transformer`
            (any size; pre- or post-norm; tied, untied or shared embeddings;
            sinusoidal or learned positions).
        output_dir: str. The folder to write (`model.bin`, the two
            vocabularies, `config.json` and `keras_attention.json`).
        quantization: str or None. A CTranslate2 weight type (`"int8"`,
            `"int8_float32"`, `"float16"`, ... see `QUANTIZATIONS`); None keeps
            float32. CTranslate2 can also convert at load time
            (`compute_type=`). Defaults to None.
        overwrite: bool. Replace the export already in `output_dir`; a folder
            holding anything else is refused even so. The new folder is
            written beside it and replaces it only when complete.
            Defaults to False.

    Returns:
        str, `output_dir`.

    Example:

    >>> export_ctranslate2(Translator.load("runs/en-de/translator"), "runs/en-de/ct2")  # doctest: +SKIP
    'runs/en-de/ct2'
    >>> import ctranslate2  # doctest: +SKIP
    >>> translator = ctranslate2.Translator("runs/en-de/ct2")  # doctest: +SKIP
    >>> translator.translate_batch([["A", "dog", "runs", "."]], beam_size=1)  # doctest: +SKIP
    """
    ctranslate2 = require_ctranslate2()
    if not isinstance(translator, Translator):
        raise ValueError(f"`translator` must be a `Translator`. Received: translator={translator!r}")
    model = translator.model
    if not isinstance(model, Transformer):
        raise ValueError(
            "Only Transformer models can be exported to CTranslate2 (its seq2seq models are Transformers). "
            f"Received: a {type(model).__name__}"
        )
    quantized = quantization_modes(model)
    if quantized:  # the converter reads float weights; CTranslate2 quantizes them itself
        raise ValueError(f"The model's weights are quantized ({', '.join(quantized)}, `Model.quantize`): export "
                         "the float model; CTranslate2 quantizes it itself (quantization='int8', --quantization).")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"`quantization` must be one of {', '.join(QUANTIZATIONS)} or None. "
                         f"Received: quantization={quantization!r}")
    check_replaceable_folder(output_dir, _holds_an_export, "CTranslate2 export of keras-attention", overwrite)
    spec = transformer_spec(model, translator.source_tokenizer.vocabulary, translator.target_tokenizer.vocabulary)

    class _Converter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    # Written beside `output_dir`, then swapped in: an export that fails leaves the old one whole.
    with folder_replaced_atomically(output_dir) as staging:
        _Converter().convert(staging, quantization=quantization, force=True)
        _write_metadata(staging, translator, model, quantization)
    return output_dir


def _holds_an_export(folder):
    return all(os.path.isfile(os.path.join(folder, name)) for name in ("model.bin", METADATA_FILE))


def _write_metadata(folder, translator, model, quantization):
    write_json(os.path.join(folder, METADATA_FILE), {
        "max_source_length": translator.max_source_length,
        "max_target_length": translator.max_target_length,
        "model_max_length": model.max_length,  # the position table's rows: CTranslate2 has none beyond
        "source_tokenizer": translator.source_tokenizer.get_config(),
        "target_tokenizer": translator.target_tokenizer.get_config(),
        "metadata": dict(translator.metadata),
        "quantization": quantization or "float32",
    })


def read_export_metadata(model_dir):
    """The `keras_attention.json` of a folder written by `export_ctranslate2`."""
    path = os.path.join(model_dir, METADATA_FILE)
    if not os.path.isfile(os.path.join(model_dir, "model.bin")):
        raise FileNotFoundError(f"{model_dir}: not a CTranslate2 model folder (no model.bin); write one with "
                                "`keras-attention export RUN_DIR --format ctranslate2 -o DIR`.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing: this CTranslate2 model was not exported by keras-attention, "
                                "so its tokenizers are unknown.")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: invalid JSON ({error}); export the model again.") from None


# The spec ----------------------------------------------------------------------------


def transformer_spec(model, source_vocabulary, target_vocabulary):
    """A filled `ctranslate2.specs.TransformerSpec` of our `Transformer` `model`."""
    from ctranslate2.specs import common_spec, transformer_spec as specs

    activation = _activation(model.activation, common_spec.Activation)
    epsilon = model.encoder_blocks[0].layer_norm_epsilon
    options = dict(pre_norm=model.normalize_first, activation=activation)
    encoder = specs.TransformerEncoderSpec(model.num_layers, model.num_heads, **options)
    decoder = specs.TransformerDecoderSpec(model.num_layers, model.num_heads, **options)
    spec = specs.TransformerSpec(encoder, decoder)
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = UNK, START, END
    spec.config.decoder_start_token = START
    spec.config.add_source_bos = spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = epsilon
    spec.register_source_vocabulary(list(source_vocabulary))
    spec.register_target_vocabulary(list(target_vocabulary))

    _set_embedding(encoder, encoder.embeddings[0], model.source_embedding)
    for block_spec, block in zip(encoder.layer, model.encoder_blocks):
        _set_self_attention(block_spec.self_attention, block.self_attention, block.self_attention_norm)
        _set_feedforward(block_spec.ffn, block)
    if model.encoder_norm is not None:
        _set_norm(encoder.layer_norm, model.encoder_norm)

    _set_embedding(decoder, decoder.embeddings, model.target_embedding)
    for block_spec, block in zip(decoder.layer, model.decoder_blocks):
        _set_self_attention(block_spec.self_attention, block.self_attention, block.self_attention_norm)
        _set_cross_attention(block_spec.attention, block.cross_attention, block.cross_attention_norm)
        _set_feedforward(block_spec.ffn, block)
    if model.decoder_norm is not None:
        _set_norm(decoder.layer_norm, model.decoder_norm)
    _set_projection(decoder.projection, model, target_vocabulary)
    return spec


def _activation(activation, kinds):
    name = keras.activations.serialize(keras.activations.get(activation))
    name = name if isinstance(name, str) else name.get("config", {}).get("name", str(name))
    known = {"relu": kinds.RELU, "gelu": kinds.GELU, "silu": kinds.SWISH, "swish": kinds.SWISH,
             "tanh": kinds.Tanh, "sigmoid": kinds.Sigmoid}
    if name not in known:
        raise ValueError(f"CTranslate2 has no {name!r} activation; it has {', '.join(sorted(known))}. "
                         f"Received: activation={activation!r}")
    return known[name]


def _numpy(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _set_embedding(stack_spec, embedding_spec, layer):
    embedding_spec.weight = _numpy(layer.token_embedding.embeddings)  # (V, d)
    stack_spec.scale_embeddings = layer.scale
    if layer.position == "learned":
        table = _numpy(layer.position_embeddings)  # (max_length, d)
    else:
        from keras_attention.layers.sinusoidal_position_encoding import sinusoidal_table

        table = _numpy(sinusoidal_table(layer.max_length, layer.d_model, 0, dtype="float32"))
    stack_spec.position_encodings.encodings = table


def _set_linear(spec, kernel, bias):
    """`kernel` `(in, out)` (already flattened) -> CTranslate2's `(out, in)`."""
    spec.weight = np.ascontiguousarray(kernel.T)
    if bias is not None:
        spec.bias = bias


def _projection(dense, heads_in=False):
    """An `EinsumDense` of multi-head attention as a 2-D kernel `(in, out)` and bias `(out,)`."""
    kernel = _numpy(dense.kernel)
    if heads_in:  # the output projection: (N, H, d) -> (N*H, d)
        kernel = kernel.reshape(-1, kernel.shape[-1])
    else:  # query, key, value: (d, N, H) -> (d, N*H), heads in CTranslate2's order
        kernel = kernel.reshape(kernel.shape[0], -1)
    bias = _numpy(dense.bias).reshape(-1) if dense.bias is not None else None
    return kernel, bias


def _fused(*denses):
    kernels, biases = zip(*(_projection(d) for d in denses))
    bias = None if biases[0] is None else np.concatenate(biases)
    return np.concatenate(kernels, axis=1), bias  # (d, k * d), (k * d,)


def _set_self_attention(spec, layer, norm):
    _set_linear(spec.linear[0], *_fused(layer._query_dense, layer._key_dense, layer._value_dense))
    _set_linear(spec.linear[1], *_projection(layer._output_dense, heads_in=True))
    _set_norm(spec.layer_norm, norm)


def _set_cross_attention(spec, layer, norm):
    _set_linear(spec.linear[0], *_projection(layer._query_dense))
    _set_linear(spec.linear[1], *_fused(layer._key_dense, layer._value_dense))
    _set_linear(spec.linear[2], *_projection(layer._output_dense, heads_in=True))
    _set_norm(spec.layer_norm, norm)


def _set_feedforward(spec, block):
    for linear, dense in ((spec.linear_0, block.feedforward_intermediate), (spec.linear_1, block.feedforward_output)):
        _set_linear(linear, _numpy(dense.kernel), _numpy(dense.bias) if dense.bias is not None else None)
    _set_norm(spec.layer_norm, block.feedforward_norm)


def _set_norm(spec, layer):
    spec.gamma = _numpy(layer.gamma)
    spec.beta = _numpy(layer.beta)


def _set_projection(spec, model, target_vocabulary):
    bias = np.zeros(model.target_vocab_size, np.float32)
    if model.output_projection is not None:
        kernel = _numpy(model.output_projection.kernel)  # (d, V)
        if model.output_projection.bias is not None:
            bias += _numpy(model.output_projection.bias)
    else:
        kernel = _numpy(model.target_embedding.token_embedding.embeddings).T  # (V, d) -> (d, V)
    bias[list(target_vocabulary).index(PAD)] += PAD_LOGIT_BIAS
    _set_linear(spec, kernel, bias)
