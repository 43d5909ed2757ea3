"""`CTranslate2Translator`: sentences to sentences with a model exported by `export_ctranslate2`.

CTranslate2 works on token strings. This class runs our WordPiece tokenizers
(the ones the model was trained with, read from `keras_attention.json`)
before and after it, and follows `Translator`'s conventions: the source is cut
to `max_source_length` tokens (with a warning), an empty sentence translates
to "", and the result is a `Translation`.

Decoding differs from ours in one documented way: CTranslate2's beam search
divides a hypothesis' log-probability by `length ** length_penalty`, where our
beam search divides by GNMT's `((5 + length) / 6) ** length_penalty`. Greedy
decoding is the same algorithm: on the same weights it gives the same tokens
up to float rounding.
"""

import numpy as np

from keras_attention.base.validation import check_positive_int
from keras_attention.data.tokenizers import SubwordTokenizer
from keras_attention.data.vocabulary import PAD
from keras_attention.decoding.options import decoding_options, with_max_length
from keras_attention.decoding.translator import Translation, warn_truncated, with_blanks
from keras_attention.serving.ctranslate2_export import read_export_metadata, require_ctranslate2

__all__ = ["CTranslate2Translator"]


class CTranslate2Translator:
    """Translate raw sentences with a CTranslate2 model folder.

    Args:
        model_dir: str. A folder written by `export_ctranslate2` (or
            `keras-attention export RUN_DIR --format ctranslate2 -o DIR`).
        device: str. `"cpu"`, `"cuda"` or `"auto"`. Defaults to `"cpu"`.
        compute_type: str. CTranslate2's compute type (`"default"` keeps the
            exported weights' type; `"int8"`, `"int8_float32"`, `"float16"`,
            ... convert at load time). Defaults to `"default"`.
        intra_threads: int. Threads per translation (0: CTranslate2 picks).
            Defaults to 0.
        inter_threads: int. Batches translated in parallel. Defaults to 1.

    Example:

    >>> translator = CTranslate2Translator("runs/en-de/ct2")  # doctest: +SKIP
    >>> translator(["A dog runs in the park."])  # doctest: +SKIP
    ['Ein Hund rennt im Park.']
    """

    def __init__(self, model_dir, device="cpu", compute_type="default", intra_threads=0, inter_threads=1):
        ctranslate2 = require_ctranslate2()
        config = read_export_metadata(model_dir)
        self.model_dir = model_dir
        self.metadata = dict(config.get("metadata") or {})
        self.max_source_length = int(config["max_source_length"])
        self.max_target_length = int(config["max_target_length"])
        self.model_max_length = config.get("model_max_length")  # None in folders exported by 0.3
        self.source_tokenizer = SubwordTokenizer.from_config(config["source_tokenizer"])
        self.target_tokenizer = SubwordTokenizer.from_config(config["target_tokenizer"])
        try:
            self.engine = ctranslate2.Translator(
                model_dir, device=device, compute_type=compute_type, intra_threads=intra_threads,
                inter_threads=inter_threads,
            )
        except (RuntimeError, ValueError) as error:  # a damaged model.bin, an unknown compute type
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValueError(f"{model_dir}: CTranslate2 cannot load this model ({reason}).") from None

    @property
    def languages(self):
        """`(source, target)` language codes, `None` where unknown."""
        return self.metadata.get("source_language"), self.metadata.get("target_language")

    def source_tokens(self, sentences):
        """Token strings of each sentence, cut to leave room for [START] and [END]; and how many were cut."""
        pieces = self.source_tokenizer.id_to_token(self.source_tokenizer.tokenize(sentences)).to_list()
        keep = self.max_source_length - 2
        truncated = sum(len(row) > keep for row in pieces)
        return [[p.decode("utf-8") for p in row[:keep]] for row in pieces], truncated

    def translate(self, sentences, options=None, max_batch_size=32, return_attention=False, **settings):
        """Translate a list of sentences.

        Args:
            sentences: list of str (or a single str).
            options: a `decoding.DecodingOptions`, or a method name, as
                `Translator.translate` takes them, with two differences:
                `length_penalty` is CTranslate2's exponent (the score is
                divided by `length ** length_penalty`), and `seed` seeds
                CTranslate2's random generator before sampling, so two calls
                with the same seed need not draw the same tokens. Defaults
                to None (greedy).
            max_batch_size: int. Sentences CTranslate2 decodes together.
                Defaults to 32.
            return_attention: must be False: attention maps come from
                `Translator` (our decoder).
            **settings: fields of `DecodingOptions` that replace those of `options`.

        Returns:
            A `Translation` (no attention). An empty or whitespace-only
            sentence translates to "" without running the model.
        """
        options = decoding_options(options, **settings)
        if return_attention:
            raise ValueError("CTranslate2Translator does not return attention maps; use `Translator` "
                             "(--engine keras). Received: return_attention=True")
        max_batch_size = check_positive_int("max_batch_size", max_batch_size)
        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = [s if isinstance(s, str) else bytes(s).decode("utf-8", "replace") for s in sentences]
        filled = [i for i, s in enumerate(sentences) if s.strip()]
        if len(filled) < len(sentences):  # blanks translate to "" without running the model
            translation = self.translate([sentences[i] for i in filled], options, max_batch_size)
            return with_blanks(translation, filled, len(sentences))
        if not sentences:
            return Translation([], np.zeros((0, 0), "int32"), np.zeros((0,), "float32"))
        source, truncated = self.source_tokens(sentences)
        warn_truncated(truncated, len(sentences), self.max_source_length)
        results = self.engine.translate_batch(source, max_batch_size=max_batch_size, return_scores=True,
                                              return_end_token=True, **self._engine_options(options))
        pieces = [result.hypotheses[0] for result in results]
        width = max(1, max(len(row) for row in pieces))
        padded = np.array([row + [PAD] * (width - len(row)) for row in pieces], dtype=object)  # (B, L) strings
        ids = self.target_tokenizer.token_to_id(padded).numpy()  # one lookup for the batch; [PAD] -> 0
        texts = [text.decode("utf-8") for text in self.target_tokenizer.detokenize(ids).numpy()]
        scores = np.array([result.scores[0] for result in results], "float32")
        return Translation(texts, ids, scores, truncated=truncated)

    def __call__(self, sentences, options=None, **settings):
        """`translate(...).texts`: a list of translated strings."""
        return self.translate(sentences, options, **settings).texts

    def _engine_options(self, options):
        """`options` as `translate_batch`'s arguments."""
        # min_decoding_length=0: like ours, [END] may come first; max counts [END] as ours does.
        max_length = with_max_length(options, self.max_target_length, self.model_max_length).max_length
        engine = dict(max_decoding_length=max_length, min_decoding_length=0)
        if options.method == "greedy":
            return dict(engine, beam_size=1)
        if options.method == "beam":
            return dict(engine, beam_size=options.beam_size, length_penalty=options.length_penalty)
        if options.seed is not None:
            require_ctranslate2().set_random_seed(options.seed)
        return dict(engine, beam_size=1, sampling_temperature=options.temperature,
                    sampling_topk=options.top_k or 0, sampling_topp=options.top_p or 1.0)
