"""`Translator`: tokenizers + model + decoding, from sentences to sentences."""

import dataclasses
import functools
import os
import warnings
import zipfile

import keras
import numpy as np
import tensorflow as tf

from keras_attention import __version__
from keras_attention.base.files import read_translator_config, replaced_atomically, translator_folder, write_json
from keras_attention.base.tensorflow_only import require_tensorflow
from keras_attention.base.validation import TruncationWarning, check_positive_int
from keras_attention.data.tokenizers import SubwordTokenizer
from keras_attention.decoding.beam import beam_search
from keras_attention.decoding.greedy import greedy_decode
from keras_attention.decoding.options import METHODS  # noqa: F401 (0.3's home of METHODS)
from keras_attention.decoding.options import DEFAULTS, decoding_options, with_max_length
from keras_attention.decoding.sampling import sample
# Registers the model classes, so `Translator.load` can rebuild them in a fresh process.
from keras_attention import models  # noqa: F401

# With `jit_compile=True`, sources are padded to a multiple of this many tokens,
# so that XLA compiles one program per batch size and length bucket, not one
# per source length.
XLA_LENGTH_MULTIPLE = 16


@dataclasses.dataclass
class Translation:
    """What `Translator.translate` returns for a batch of sentences.

    Attributes:
        texts: list of str, one translation a sentence.
        tokens: int array `(B, L)` of output ids (no [START]).
        scores: float array `(B,)`: summed log-probabilities (greedy, sample)
            or the length-penalised score of the best beam.
        attention: float array `(B, L, S)` over the source tokens, or None.
        source_tokens: list of lists of str, the source pieces (for plots).
        target_tokens: list of lists of str, the output pieces (for plots).
        truncated: int, how many sentences were cut to `max_source_length`.
    """

    texts: list
    tokens: np.ndarray
    scores: np.ndarray
    attention: object = None
    source_tokens: list = None
    target_tokens: list = None
    truncated: int = 0


class Translator(tf.Module):
    """Translate raw sentences with a trained model.

    Tokenizes the source (adding [START] and [END]), cuts sentences longer
    than `max_source_length` tokens (with a warning), runs greedy, beam or
    sampled decoding with the model's caches, and detokenizes. Everything from
    strings to strings runs in TensorFlow, so `keras_attention.serving`
    can export it as a SavedModel.

    Args:
        model: a `Transformer` or `Seq2SeqRNN` (anything with the decoding
            interface `init_decoding_state` / `decode_step`).
        source_tokenizer: the `SubwordTokenizer` of the source the model was
            trained with; its size must equal the model's
            `source_vocab_size` where the model has one (a `ValueError`
            otherwise), as for the target.
        target_tokenizer: the `SubwordTokenizer` of the target.
        max_source_length: int. Longest source, markers included. Defaults to 128.
        max_target_length: int. Most output tokens. Defaults to 128.
        metadata: dict or None. What the model translates, saved with it:
            `source_language`, `target_language`, `dataset` (what `train`
            records). `save` adds the package version. Defaults to None.
        jit_compile: bool. Compile greedy and beam decoding with XLA
            (`tf.function(jit_compile=True)`), sources padded to a multiple
            of 16 tokens. Same translations; each new batch size and length
            bucket compiles once (seconds), then decodes faster
            (`scripts/benchmark_inference.py` measures both). Sampling is
            not compiled. A setting of this process, not saved with the
            translator. Defaults to False.

    Example:

    >>> translator = Translator(model, en_tokenizer, de_tokenizer)  # doctest: +SKIP
    >>> translator(["A man runs."])  # doctest: +SKIP
    ['Ein Mann rennt.']
    """

    def __init__(
        self, model, source_tokenizer, target_tokenizer, max_source_length=128, max_target_length=128,
        metadata=None, jit_compile=False,
    ):
        require_tensorflow("Decoding with `Translator`")
        super().__init__(name="translator")
        self.metadata = dict(metadata or {})
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_source_length = check_positive_int("max_source_length", max_source_length)
        self.max_target_length = check_positive_int("max_target_length", max_target_length)
        if not isinstance(jit_compile, bool):
            raise ValueError(f"`jit_compile` must be True or False. Received: jit_compile={jit_compile!r}")
        self.jit_compile = jit_compile
        for side, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
            size = getattr(model, f"{side}_vocab_size", None)  # our models' embedding and output rows
            if size is not None and size != tokenizer.vocab_size:
                raise ValueError(f"The model's {side} vocabulary has {size} tokens but the {side} tokenizer's has "
                                 f"{tokenizer.vocab_size}: they were not made together. Received: "
                                 f"model.{side}_vocab_size={size}, {side}_tokenizer.vocab_size={tokenizer.vocab_size}")
        model_max = getattr(model, "max_length", None)
        if model_max is not None and max_target_length > model_max:
            raise ValueError(
                f"`max_target_length` exceeds the model's maximum length {model_max}. "
                f"Received: max_target_length={max_target_length}"
            )

    # Graph pieces (also used by the SavedModel export) ------------------------

    def source_ids(self, sentences):
        """Strings `(B,)` -> int32 `(B, S)` ids with [START]/[END], 0-padded,
        cut to `max_source_length` (keeping [END]); and the uncut lengths."""
        tok = self.source_tokenizer
        pieces = tok.tokenize(tf.convert_to_tensor(sentences, tf.string))  # ragged (B, None)
        lengths = pieces.row_lengths() + 2
        pieces = pieces[:, : self.max_source_length - 2]
        batch = pieces.nrows()
        start = tf.fill([batch, 1], tf.constant(tok.start_id, tf.int32))
        end = tf.fill([batch, 1], tf.constant(tok.end_id, tf.int32))
        ids = tf.concat([start, tf.cast(pieces, tf.int32), end], axis=1)  # ragged (B, None)
        return ids.to_tensor(default_value=tok.pad_id), lengths

    def decode_ids(self, source_ids, options=None, *, return_attention=False, **settings):
        """Source ids `(B, S)` -> the decoding result (tokens, scores, attention).

        `options` and `settings` as in `translate`. With `jit_compile`,
        greedy and beam decoding run in XLA-compiled chunks of steps that
        leave finished sentences behind (`decoding.chunks`), on the source
        padded to a multiple of `XLA_LENGTH_MULTIPLE` tokens (padding is
        masked, so the translations are the same); attention comes back over
        the `S` given positions.
        """
        options = self.resolve_options(options, **settings)
        if not self.jit_compile or options.method == "sample":
            return self._decode(source_ids, options, return_attention)
        length = tf.shape(source_ids)[1]
        padding = -length % XLA_LENGTH_MULTIPLE
        padded = tf.pad(source_ids, [[0, 0], [0, padding]], constant_values=self.source_tokenizer.pad_id)
        result = self._function(options, return_attention, xla=True)(padded)
        if return_attention:  # (B, L, S + padding) -> (B, L, S)
            result = result._replace(attention=result.attention[..., :length])
        return result

    def resolve_options(self, options=None, defaults=DEFAULTS, **settings):
        """The `DecodingOptions` these arguments ask for (`decoding_options`), with
        `max_length` filled in (the translator's `max_target_length`) and
        refused above the model's maximum length, and `beam_size` refused above
        the target vocabulary's size."""
        options = decoding_options(options, defaults, **settings)
        vocabulary = self.target_tokenizer.vocab_size
        if options.method == "beam" and options.beam_size > vocabulary:  # more hypotheses than tokens to extend by
            raise ValueError(f"`beam_size` must be at most the target vocabulary's size, {vocabulary}. "
                             f"Received: beam_size={options.beam_size}")
        return with_max_length(options, self.max_target_length, getattr(self.model, "max_length", None))

    def _decode(self, source_ids, options, return_attention, chunked=False):
        """`decode_ids` without XLA: the decoding function of `options.method`
        (with `chunked`, greedy and beam search run in XLA-compiled chunks)."""
        common = dict(
            start_id=self.target_tokenizer.start_id,
            end_id=self.target_tokenizer.end_id,
            max_length=options.max_length,
            return_attention=return_attention,
        )
        if options.method == "greedy":
            return greedy_decode(self.model, source_ids, chunked=chunked, **common)
        if options.method == "beam":
            return beam_search(  # only the best is kept: stop once it is settled
                self.model, source_ids, complete_beam=False, chunked=chunked, **options.settings(), **common
            ).best()
        common.pop("return_attention")
        return sample(self.model, source_ids, **options.settings(), **common)

    def decoding_function(self, options=None, return_attention=False, **settings):
        """A `tf.function` that decodes int32 source ids `(B, S)` of any batch size and length as
        `decode_ids` does, traced once and kept (one per decoding setting; `options` and `settings`
        as in `translate`).

        Run eagerly, the decoding loop dispatches every op of every step from
        Python; traced once, a sentence decodes as fast as in the exported
        SavedModel (scripts/benchmark_inference.py measures both). Functions
        that call it (the export's two signatures) share one traced loop.

        Example:

        >>> beam = translator.decoding_function(method="beam", beam_size=4)  # doctest: +SKIP
        >>> result = beam(translator.source_ids(tf.constant(["A dog runs."]))[0])  # doctest: +SKIP
        """
        return self._function(self.resolve_options(options, **settings), return_attention)

    def _function(self, options, return_attention, xla=False):
        """`decoding_function`, or with `xla=True` `_decode` in XLA-compiled chunks (its source padded to a
        multiple of `XLA_LENGTH_MULTIPLE` by `decode_ids`)."""
        options = self.resolve_options(options).used()
        key = (options, bool(return_attention), xla)
        decoders = self.__dict__.setdefault("_decoders", {})  # not a tracked attribute of the tf.Module
        if key not in decoders:
            # A partial, not a lambda: TensorFlow counts traces per code object, so
            # one lambda traced once by each of several Translators would be reported
            # as a function "retracing" too often.
            function = functools.partial(self._decode, chunked=True) if xla else self.decode_ids
            decoders[key] = tf.function(
                functools.partial(function, options=options, return_attention=return_attention),
                input_signature=[tf.TensorSpec([None, None], tf.int32)],
                autograph=False,  # the decoding loops are written as graph ops: nothing to convert
            )
        return decoders[key]

    # Python API ---------------------------------------------------------------

    def translate(self, sentences, options=None, return_attention=False, **settings):
        """Translate a list of sentences.

        Args:
            sentences: list of str (or a single str).
            options: a `DecodingOptions`, or a method name (`"greedy"`,
                `"beam"`, `"sample"`) for the default options of that method.
                Defaults to None (`DecodingOptions()`: greedy).
            return_attention: bool. Also return attention maps and tokens.
            **settings: fields of `DecodingOptions` that replace those of
                `options` (`method="beam", beam_size=8`).

        Returns:
            A `Translation`. An empty or whitespace-only sentence translates
            to "" (no tokens, score 0), without running the model.
        """
        options = self.resolve_options(options, **settings)
        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = [s if isinstance(s, str) else bytes(s).decode("utf-8", "replace") for s in sentences]
        filled = [i for i, s in enumerate(sentences) if s.strip()]
        if len(filled) < len(sentences):
            translation = self.translate([sentences[i] for i in filled], options, return_attention)
            return with_blanks(translation, filled, len(sentences))
        if not sentences:
            return Translation([], np.zeros((0, 0), "int32"), np.zeros((0,), "float32"),
                               attention=np.zeros((0, 0, 0), "float32") if return_attention else None,
                               source_tokens=[] if return_attention else None,
                               target_tokens=[] if return_attention else None)
        ids, lengths = self.source_ids(sentences)
        truncated = int(np.sum(lengths.numpy() > self.max_source_length))
        warn_truncated(truncated, len(sentences), self.max_source_length)
        if options.method == "sample":  # eager, so that `seed` gives the same draws as it always has
            result = self.decode_ids(ids, options, return_attention=return_attention)
        else:
            result = self.decoding_function(options, return_attention)(ids)
        tokens = np.asarray(result.tokens)
        texts = [t.decode("utf-8") for t in self.target_tokenizer.detokenize(tokens).numpy()]
        translation = Translation(texts, tokens, np.asarray(result.scores), truncated=truncated)
        if return_attention:
            translation.attention = np.asarray(result.attention)
            translation.source_tokens = _pieces(self.source_tokenizer, ids.numpy())
            translation.target_tokens = _pieces(self.target_tokenizer, tokens)
        return translation

    def __call__(self, sentences, options=None, **settings):
        """`translate(...).texts`: a list of translated strings."""
        return self.translate(sentences, options, **settings).texts

    # Saving -------------------------------------------------------------------

    def save(self, directory):
        """Write `model.keras` and `translator.json` (with both vocabularies) to `directory`.

        Each file is written under a temporary name and renamed into place, so
        a kill during `save` leaves the previous translator whole. A model
        quantized with `Model.quantize` is refused (Keras would load it back as
        float); export it with `serving.export`, or save the float translator.
        """
        quantized = quantization_modes(self.model)
        if quantized:
            raise ValueError(f"A translator whose model is quantized ({', '.join(quantized)}, `Model.quantize`) "
                             "cannot be saved: it would load back as float. Export it with `serving.export`, or "
                             "save the float translator and quantize it after loading.")
        os.makedirs(directory, exist_ok=True)
        with replaced_atomically(os.path.join(directory, "model.keras")) as partial:
            self.model.save(partial)
        config = {
            "max_source_length": self.max_source_length,
            "max_target_length": self.max_target_length,
            "source_tokenizer": self.source_tokenizer.get_config(),
            "target_tokenizer": self.target_tokenizer.get_config(),
            "metadata": {**self.metadata, "keras_attention_version": __version__},
        }
        write_json(os.path.join(directory, "translator.json"), config)

    @classmethod
    def load(cls, directory, jit_compile=False):
        """Rebuild a translator written by `save` (`jit_compile`: as in the constructor).

        `directory` is the folder `save` wrote, or a run folder of
        `keras-attention train` (its `translator/` folder is loaded), as the
        command line takes them.
        """
        directory = translator_folder(directory)
        config = read_translator_config(directory)
        config_path = os.path.join(directory, "translator.json")
        if "metadata" not in config:
            warnings.warn(f"{config_path} was written by an older keras-attention: the languages and "
                          "data set it was trained on are unknown.", stacklevel=2)
        model = _load_model(os.path.join(directory, "model.keras"))
        try:
            return cls(
                model,
                SubwordTokenizer.from_config(config["source_tokenizer"]),
                SubwordTokenizer.from_config(config["target_tokenizer"]),
                max_source_length=config["max_source_length"],
                max_target_length=config["max_target_length"],
                metadata=config.get("metadata"),
                jit_compile=jit_compile,
            )
        except (TypeError, ValueError) as error:  # a damaged or hand-edited translator.json
            raise ValueError(f"{config_path}: {error} (write it again with Translator.save or "
                             "`keras-attention train`)") from None

    @property
    def languages(self):
        """`(source, target)` language codes, `None` where unknown."""
        return self.metadata.get("source_language"), self.metadata.get("target_language")


def _load_model(path):
    """The Keras model in `path`, or one line saying why not."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: missing; the translator folder needs the model beside translator.json.")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a valid Keras archive (truncated or not a .keras file).")
    try:
        return keras.models.load_model(path, compile=False)  # inference needs no optimizer or loss
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{path}: not a valid Keras archive ({reason}).") from None


def quantization_modes(model):
    """The modes (`"int8"`, ...) `Model.quantize` stored `model`'s layers in, sorted; empty when it is float."""
    return sorted({layer.quantization_mode for layer in model._flatten_layers()
                   if getattr(layer, "quantization_mode", None)})


def warn_truncated(truncated, total, max_source_length):
    """The warning for sources cut to `max_source_length` tokens (none if `truncated` is 0)."""
    if truncated:
        warnings.warn(TruncationWarning(truncated, total, max_source_length), stacklevel=3)


def with_blanks(translation, filled, size):
    """`translation` of the sentences at indices `filled`, spread to `size` rows; "" elsewhere."""

    def spread(rows, blank):
        out = [blank] * size
        for i, row in zip(filled, rows):
            out[i] = row
        return out

    def spread_array(array):
        out = np.zeros((size, *array.shape[1:]), array.dtype)
        out[filled] = array
        return out

    result = Translation(spread(translation.texts, ""), spread_array(translation.tokens),
                         spread_array(translation.scores), truncated=translation.truncated)
    if translation.attention is not None:
        result.attention = spread_array(translation.attention)
        result.source_tokens = spread(translation.source_tokens, [])
        result.target_tokens = spread(translation.target_tokens, [])
    return result


def _pieces(tokenizer, ids):
    """Token strings for each row of `ids`, without padding and after [END]."""
    vocabulary = tokenizer.vocabulary
    rows = []
    for row in ids:
        tokens = []
        for i in row:
            if i == tokenizer.pad_id:
                continue
            tokens.append(vocabulary[i])
            if i == tokenizer.end_id:
                break
        rows.append(tokens)
    return rows
