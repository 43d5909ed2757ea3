"""`DecodingOptions`: how a translator decodes, each setting's default and check in one place."""

import dataclasses

from keras_attention.base.options import check_option
from keras_attention.base.validation import check_choice

METHODS = ("greedy", "beam", "sample")
# The methods that search for the most likely translation: what export and the attention explorer take.
SEARCH_METHODS = ("greedy", "beam")
# The settings each method reads (besides `max_length`); it ignores the others.
METHOD_SETTINGS = {
    "greedy": (),
    "beam": ("beam_size", "length_penalty"),
    "sample": ("temperature", "top_k", "top_p", "seed"),
}


def _setting(default, help):
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    """How to decode: the method and its settings, checked when made.

    `Translator`, `CTranslate2Translator`, `serving.export`,
    `explain.explain` and `training.evaluate_bleu` take one, and the command
    line's decoding flags are made from its fields. Immutable: `replace`
    returns a changed copy.

    Args:
        method: str. `"greedy"` (the most likely token at each step),
            `"beam"` (beam search) or `"sample"`. Defaults to `"greedy"`.
        beam_size: int >= 1. Hypotheses kept per sentence (beam).
            Defaults to 4.
        length_penalty: float in [0, 10]. GNMT's alpha (Wu et al., 2016): beam
            scores are divided by `((5 + length) / 6) ** alpha`; larger
            values favour longer translations (beam). Defaults to 0.6.
        temperature: float > 0. Divides the logits before sampling: below 1
            sharper, above 1 flatter (sample). Defaults to 1.0.
        top_k: int >= 1 or None. Sample from the `k` most likely tokens only
            (sample). Defaults to None (all).
        top_p: float in (0, 1] or None. Sample from the smallest set of
            tokens whose probability reaches `p` (Holtzman et al., 2020)
            (sample). Defaults to None (all).
        seed: int in [0, 2**31 - 1] or None. The seed of the draws: the
            same seed, the same translations (sample). Defaults to None.
        max_length: int >= 1 or None. Most output tokens, at most the
            model's maximum. Defaults to None (the translator's
            `max_target_length`).

    Example:

    >>> options = DecodingOptions(method="beam", beam_size=8)
    >>> options.settings()
    {'beam_size': 8, 'length_penalty': 0.6}
    >>> options.replace(method="greedy").settings()
    {}
    """

    method: str = _setting("greedy", "the decoding method; greedy takes the most likely token at each step")
    beam_size: int = _setting(4, "beam: hypotheses kept per sentence")
    length_penalty: float = _setting(0.6, "beam: GNMT's alpha; larger favours longer translations")
    temperature: float = _setting(1.0, "sample: divides the logits; below 1 sharper, above 1 flatter")
    top_k: int = _setting(None, "sample: draw from the K most likely tokens only")
    top_p: float = _setting(None, "sample: draw from the smallest set of tokens whose probability reaches P")
    seed: int = _setting(None, "sample: the seed of the draws (the same seed, the same translations)")
    max_length: int = _setting(None, "most output tokens (default: the translator's)")

    def __post_init__(self):
        check_choice("method", self.method, METHODS)
        for name in ("beam_size", "length_penalty", "temperature"):
            if getattr(self, name) is None:
                raise ValueError(f"`{name}` must be set; leave it out for its default. Received: {name}=None")
        for name in ("beam_size", "length_penalty", "temperature", "top_k", "top_p", "max_length", "seed"):
            if getattr(self, name) is not None:  # stored back as a Python number
                object.__setattr__(self, name, check_option(name, getattr(self, name)))
        for name in ("length_penalty", "temperature", "top_p"):  # 1 and 1.0 make the same options
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))

    def replace(self, **changes):
        """A copy with `changes` (field names to values), checked as a new one is."""
        return dataclasses.replace(self, **changes)

    def settings(self):
        """The settings `method` reads, as keyword arguments of its decoding function."""
        return {name: getattr(self, name) for name in METHOD_SETTINGS[self.method]}

    def used(self):
        """These options with every setting `method` ignores at its default: equal
        options decode alike (a cache key)."""
        ignored = {f.name: f.default for f in dataclasses.fields(self)
                   if f.name not in ("method", "max_length", *METHOD_SETTINGS[self.method])}
        return self.replace(**ignored)

    def to_dict(self):
        return dataclasses.asdict(self)


DEFAULTS = DecodingOptions()
# What a SavedModel export decodes with when not told (`serving.export`).
EXPORT_DEFAULTS = DecodingOptions(method="beam")


def with_max_length(options, default, model_max):
    """`options` with `max_length` filled in (`default`, the translator's) and refused above `model_max`, the
    model's maximum length (None: no limit), whichever engine decodes."""
    if options.max_length is None:
        return options.replace(max_length=default)
    if model_max is not None and options.max_length > model_max:
        raise ValueError(f"`max_length` (--max-length) exceeds the model's maximum length {model_max}. "
                         f"Received: max_length={options.max_length}")
    return options


def decoding_options(options=None, defaults=DEFAULTS, **settings):
    """The `DecodingOptions` a decoder was asked for: the one way each of them reads its arguments.

    Args:
        options: a `DecodingOptions`, a method name as a shorthand for
            `defaults` with that method, or None for `defaults`.
        defaults: `DecodingOptions`. What `options=None` means. Defaults to
            `DecodingOptions()`.
        **settings: fields to change (`method="beam"`, `beam_size=8`, ...);
            those given as None keep the value of `options`.

    Returns:
        A `DecodingOptions`.
    """
    if options is None:
        options = defaults
    elif isinstance(options, str):
        options = defaults.replace(method=check_choice("method", options, METHODS))
    elif not isinstance(options, DecodingOptions):
        raise ValueError(f"`options` must be a `DecodingOptions` or a method name ({', '.join(METHODS)}). "
                         f"Received: options={options!r}")
    names = {f.name for f in dataclasses.fields(DecodingOptions)}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise ValueError(f"Unknown decoding settings {unknown}; the settings are {sorted(names)}.")
    changes = {name: value for name, value in settings.items() if value is not None}
    return options.replace(**changes) if changes else options
