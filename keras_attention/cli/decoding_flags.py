"""The command line's decoding flags, made from the fields of `DecodingOptions`, and the engine and XLA flags
beside them."""

import dataclasses

from keras_attention.base.options import argument_type
from keras_attention.decoding.options import DEFAULTS, METHOD_SETTINGS, METHODS, DecodingOptions, decoding_options

FIELDS = {field.name: field for field in dataclasses.fields(DecodingOptions)}
# The namespace attribute of each decoding flag: its field's name behind this prefix, so that
# `--seed` of the decoder never meets `--seed` of the data.
PREFIX = "decoding_"


def add_decoding_options(group, names=tuple(FIELDS), defaults=DEFAULTS, methods=METHODS, note=""):
    """One flag a field of `DecodingOptions` in `names` (`beam_size` -> `--beam-size`), its help ending
    with the default of `defaults`; a flag left out keeps that default (`options_from_args`)."""
    for name in names:
        default = getattr(defaults, name)
        help = note + FIELDS[name].metadata["help"] + ("" if default is None else f" (default: {default})")
        if name == "method":
            kind = dict(choices=methods)
        else:
            kind = dict(type=argument_type(name), metavar=name.split("_")[-1].upper())
        # None when not given, so that a setting the method would ignore is refused (`options_from_args`).
        group.add_argument("--" + name.replace("_", "-"), dest=PREFIX + name, help=help, **kind)


def options_from_args(args, defaults=DEFAULTS):
    """The `DecodingOptions` of the flags `add_decoding_options` added to `args`' parser.

    Raises:
        ValueError: a flag of another method than the one asked for (`--beam-size` without
            `--method beam`), which would otherwise be ignored in silence.
    """
    given = {name[len(PREFIX):]: value for name, value in vars(args).items()
             if name.startswith(PREFIX) and value is not None}
    options = decoding_options(None, defaults, **given)
    ignored = [name for name in given if name not in ("method", "max_length", *METHOD_SETTINGS[options.method])]
    if ignored:
        flags = " ".join("--" + name.replace("_", "-") for name in ignored)
        owner = next(method for method, names in METHOD_SETTINGS.items() if ignored[0] in names)
        raise ValueError(f"{flags}: {'a setting' if len(ignored) == 1 else 'settings'} of --method {owner}, "
                         f"not of --method {options.method}; add --method {owner}, or leave {flags} out.")
    return options


def add_xla_cache_flags(group):
    """`--xla-cache DIR` and `--no-xla-cache`, for the commands that compile with XLA."""
    group.add_argument("--xla-cache", metavar="DIR",
                       help="keep XLA's compiled programs here, for later runs of the same shapes "
                            "(default: $KERAS_ATTENTION_XLA_CACHE, else ~/.cache/keras-attention/xla)")
    group.add_argument("--no-xla-cache", action="store_true", help="compile every XLA program anew")


def add_translation_flags(parser):
    """The decoding group of `evaluate` and `translate`: the search, the engine that runs it, and XLA."""
    group = parser.add_argument_group("decoding")
    add_decoding_options(group, ("method", "beam_size", "length_penalty", "temperature", "top_k", "top_p", "seed"))
    group.add_argument("--engine", default="keras", choices=("keras", "ctranslate2"),
                       help="keras: our decoder on a translator folder; ctranslate2: a folder written by "
                            "export --format ctranslate2 (greedy, beam or sample; length penalty as "
                            "CTranslate2 defines it)")
    group.add_argument("--jit-compile", action="store_true",
                       help="keras engine: compile greedy and beam decoding with XLA (each new batch size and "
                            "length bucket compiles once; faster after that)")
    add_xla_cache_flags(group)
    group.add_argument("--compute-type",
                       help="ctranslate2 engine: CTranslate2's compute type (default, int8, float16, ...; "
                            "default: default)")
