"""The command line's decoding flags, made from the fields of `DecodingOptions`."""

import dataclasses

from keras_attention.base.options import argument_type
from keras_attention.decoding.options import DEFAULTS, METHODS, DecodingOptions, decoding_options

FIELDS = {field.name: field for field in dataclasses.fields(DecodingOptions)}
# The namespace attribute of each decoding flag: its field's name behind this prefix, so that
# `--seed` of the decoder never meets `--seed` of the data.
PREFIX = "decoding_"


def add_decoding_options(group, names=tuple(FIELDS), defaults=DEFAULTS, methods=METHODS, note=""):
    """One flag a field of `DecodingOptions` in `names` (`beam_size` -> `--beam-size`), with its help and
    the default of `defaults` (which the help shows); a flag left out keeps that default (`options_from_args`)."""
    for name in names:
        help = note + FIELDS[name].metadata["help"]
        if name == "method":
            kind = dict(choices=methods)
        else:
            kind = dict(type=int if name == "seed" else argument_type(name), metavar=name.split("_")[-1].upper())
        group.add_argument("--" + name.replace("_", "-"), dest=PREFIX + name, default=getattr(defaults, name),
                           help=help, **kind)


def options_from_args(args, defaults=DEFAULTS):
    """The `DecodingOptions` of the flags `add_decoding_options` added to `args`' parser."""
    given = {name[len(PREFIX):]: value for name, value in vars(args).items() if name.startswith(PREFIX)}
    return decoding_options(None, defaults, **given)
