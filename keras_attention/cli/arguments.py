"""The `keras-attention` command line: its commands and flags (`configs` turns them into a `TrainConfig`)."""

import argparse
import difflib
import types

from keras_attention import DATA_ENV_VAR, __version__
from keras_attention.base.options import CTRANSLATE2_QUANTIZATIONS as QUANTIZATIONS
from keras_attention.base.options import (BUCKET_METHODS, DATASETS, DEFAULT_BUCKET_METHOD, DEFAULT_LANGUAGES,
                                          LANGUAGE_CODED, LR_SCHEDULES, MAX_BUCKETS, MODEL_KINDS, PAIRS_PER_BUCKET,
                                          PEAK_LEARNING_RATE, PRECISIONS, PRESET_NAMES, RECIPE_LEARNING_RATES,
                                          SHARD_SIZE, STRATEGIES, WARMUP_FRACTION, XLA_MIN_PAIRS)
from keras_attention.base.options import argument_type as checked
from keras_attention.cli.decoding_flags import add_decoding_options, add_translation_flags, add_xla_cache_flags
from keras_attention.decoding.options import EXPORT_DEFAULTS, SEARCH_METHODS
from keras_attention.training.config import TrainConfig

# The defaults of `train` and `prepare`'s flags: TrainConfig's own, by their flat names (a flag left out
# leaves its field as the Python API has it).
TRAIN = types.SimpleNamespace(**TrainConfig().flat())


# `train` flags that replace a size of the Transformer preset (`models.Transformer` arguments), with their help.
TRANSFORMER_SIZES = {
    "--num-layers": ("num_layers", "encoder layers, and as many decoder layers"),
    "--d-model": ("d_model", "width of the embeddings and of every layer's output, a multiple of --num-heads"),
    "--num-heads": ("num_heads", "attention heads in each attention layer"),
    "--intermediate-dim": ("intermediate_dim", "width of the feed-forward block's hidden layer"),
}
TRANSFORMER_SIZE_FLAGS = {flag: name for flag, (name, _) in TRANSFORMER_SIZES.items()}


def _add_data_flags(parser, evaluate=False):
    group = parser.add_argument_group("data")
    group.add_argument("--dataset", choices=DATASETS,
                       help="default: prepared when --data-dir holds a prepared corpus, else multi30k")
    default = "the translator's, else " if evaluate else ""
    corpora = f"for {', '.join(LANGUAGE_CODED)}"
    group.add_argument("--source", help=f"source language (default: {default}{DEFAULT_LANGUAGES[0]} {corpora})")
    group.add_argument("--target", help=f"target language (default: {default}{DEFAULT_LANGUAGES[1]} {corpora})")
    group.add_argument("--data-dir", help=f"corpus folder: Multi30k (default: ${DATA_ENV_VAR}, then the "
                       "Keras cache), WMT14 files or TFDS data, or a folder made by `prepare`")
    group.add_argument("--train-files", nargs="+",
                       help="files: SOURCE TARGET (paths or quoted glob patterns of shards); tsv: FILE")
    group.add_argument("--valid-files", nargs="+", help="files, tsv: the validation split, as --train-files")
    group.add_argument("--test-files", nargs="+", help="files, tsv: the test split, as --train-files")
    group.add_argument("--tfds-name", help="a TFDS translation data set, e.g. wmt14_translate/de-en")


def _add_corpus_flags(parser):
    group = parser.add_argument_group("corpus reading and vocabulary")
    group.add_argument("--strict-data", action="store_true",
                       help="stop at the first bad training line (not UTF-8, empty side, too long) "
                            "with its file and line, instead of skipping and counting it")
    group.add_argument("--no-clean", action="store_true",
                       help="keep pairs over --max-words or --max-ratio (cleaning is on for your own files)")
    group.add_argument("--max-words", type=checked("max_words"), default=TRAIN.max_words,
                       help=f"skip pairs with more words a side (default: {TRAIN.max_words})")
    group.add_argument("--max-ratio", type=checked("max_ratio"), default=TRAIN.max_ratio,
                       help=f"skip pairs whose word counts differ more than this factor (default: {TRAIN.max_ratio:g})")
    group.add_argument("--vocab-size", type=checked("vocab_size"), default=TRAIN.vocab_size,
                       help="subword pieces of each vocabulary, the reserved tokens included")
    group.add_argument("--lower-case", action="store_true", help="lower-case the text before the vocabulary")
    group.add_argument("--joint-vocabulary", action="store_true", help="one vocabulary for both languages")
    group.add_argument("--vocab-sample", type=checked("vocab_sample"), default=TRAIN.vocab_sample, metavar="N",
                       help="learn the vocabulary from at most N sentences, spread over the corpus")
    group.add_argument("--max-length", type=checked("max_length"), default=TRAIN.max_length,
                       help="longest sentence in tokens")
    group.add_argument("--max-train-examples", type=checked("max_train_examples"), metavar="N",
                       help="use the first N training pairs only (default: all)")
    group.add_argument("--seed", type=checked("seed"), default=TRAIN.seed,
                       help="seed of the shuffles and of the generated dates (and, in train, of the initial "
                            "weights)")


def _add_training_flags(parser):
    group = parser.add_argument_group("training")
    group.add_argument("--epochs", type=checked("epochs"), default=TRAIN.epochs, help="passes over the training data")
    group.add_argument("--time-limit", dest="time_limit_minutes", type=checked("time_limit_minutes"),
                       metavar="MINUTES", help="train no epoch that would end past this many minutes of training "
                                               "(validation excluded); default: no limit, all --epochs")
    group.add_argument("--batch-size", type=checked("batch_size"), default=TRAIN.batch_size,
                       help="global batch, in sentences")
    group.add_argument("--batch-tokens", type=checked("batch_tokens"),
                       help="global batch as a token budget (instead of --batch-size)")
    group.add_argument("--learning-rate", type=checked("learning_rate"),
                       help=f"a fixed rate (default: {RECIPE_LEARNING_RATES['rnn']:g} for the recurrent models, "
                            "the warm-up schedule for the Transformer)")
    group.add_argument("--warmup-steps", type=checked("warmup_steps"),
                       help=f"Transformer: steps of the rate's linear warm-up "
                            f"(default: {WARMUP_FRACTION * 100:g}%% of all steps)")
    group.add_argument("--peak-learning-rate", type=checked("peak_learning_rate"),
                       help=f"Transformer: the schedule's rate after the warm-up (default: {PEAK_LEARNING_RATE:g})")
    group.add_argument("--lr-schedule", default=TRAIN.lr_schedule, choices=LR_SCHEDULES,
                       help="Transformer: after the warm-up the rate decays as 1/sqrt(step) (inverse_sqrt), or "
                            "as half a cosine to zero at the last step of --epochs (cosine)")
    group.add_argument("--label-smoothing", type=checked("label_smoothing"), default=TRAIN.label_smoothing,
                       help="probability spread over the other tokens in the loss's targets")
    group.add_argument("--dropout", type=checked("dropout"), help="the model's dropout rate (default: the preset's)")
    group.add_argument("--attention-dropout", type=checked("attention_dropout"),
                       help="Transformer: dropout on the attention weights (default: 0)")
    for flag, (name, what) in TRANSFORMER_SIZES.items():
        group.add_argument(flag, type=checked(name), metavar="N", help=f"Transformer: {what} (default: the --preset's)")
    group.add_argument("--strategy", default=TRAIN.strategy, choices=STRATEGIES,
                       help="auto: MirroredStrategy over two or more GPUs, else one device; multi_worker: the "
                            "workers of TF_CONFIG")
    group.add_argument("--precision", default=TRAIN.precision, choices=PRECISIONS,
                       help="Keras dtype policy: mixed_* compute in 16 bits and keep float32 weights")
    xla = group.add_mutually_exclusive_group()
    xla.add_argument("--jit", action="store_true",
                     help="compile the training step with XLA however short the run (default: when it trains "
                          f"on at least {XLA_MIN_PAIRS:,} pairs, epochs included, or on a corpus of unknown size)")
    xla.add_argument("--no-jit", action="store_true", help="do not compile with XLA")
    group.add_argument("--length-buckets", type=checked("length_buckets"), metavar="N",
                       help="length buckets of the training batches, each one batch shape under XLA "
                            f"(default: 1 for every {PAIRS_PER_BUCKET:,} pairs trained on, epochs included, "
                            f"up to {MAX_BUCKETS})")
    group.add_argument("--bucket-method", choices=BUCKET_METHODS, default=TRAIN.bucket_method,
                       help="where the length buckets' boundaries go: about as many pairs in each "
                            "(equal_count) or the fewest padded tokens (min_padding); default: "
                            f"{DEFAULT_BUCKET_METHOD}")
    add_xla_cache_flags(group)
    group.add_argument("--no-cpu-dropout", action="store_true",
                       help="Keras' dropout random numbers even under XLA on a CPU "
                            "(see keras_attention.models.cpu_kernels)")
    group.add_argument("--no-cpu-rows", action="store_true",
                       help="Keras' per-token layers on (batch, length, d) even under XLA on a CPU "
                            "(see keras_attention.models.cpu_kernels)")


def _examples(*commands):
    """A help's examples, one command a line, printed as written so that a copied one runs."""
    return "examples:\n" + "\n".join(f"  {command}" for command in commands)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples printed as written (not re-wrapped at hyphens); each option's default after its help,
    read from the value the option is given (TrainConfig's or DecodingOptions', for most)."""

    def _get_help_string(self, action):
        help, default = action.help or "", action.default
        if default is None or default is False or default == argparse.SUPPRESS or "default:" in help:
            return help
        return f"{help} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the usage is one `--help` away) and
    whose description and examples are printed as written."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}{self._suggestion(message)} (see {self.prog} --help)\n")

    def _suggestion(self, message):
        """"; did you mean --beam-size?" for an unknown flag close to one of this command's, else ""."""
        if not message.startswith("unrecognized arguments: "):
            return ""
        flags = [option for action in self._actions for option in action.option_strings if option.startswith("--")]
        for word in message[len("unrecognized arguments: "):].split():
            close = difflib.get_close_matches(word.split("=")[0], flags, n=1, cutoff=0.75)
            if word.startswith("--") and close:
                return f"; did you mean {close[0]}?"
        return ""


def build_parser():
    parser = _Parser(
        prog="keras-attention",
        description="Train, evaluate and run attention translation models (Keras 3).",
    )
    parser.add_argument("--version", action="version", version=f"keras-attention {__version__}")
    parser.add_argument("--verbose", action="store_true", help=_VERBOSE)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_train_command(commands)
    _add_prepare_command(commands)
    _add_evaluate_command(commands)
    _add_translate_command(commands)
    _add_explain_command(commands)
    _add_demo_command(commands)
    _add_average_checkpoints_command(commands)
    _add_export_command(commands)
    for command in commands.choices.values():  # also after the command; unset unless given there
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE)
    parser.commands = commands.choices  # name -> the command's own parser
    return parser


_VERBOSE = "show TensorFlow's own start-up and device log lines (hidden by default)"


def parse_command_line(argv):
    """`argv` parsed with options and positional arguments in any order.

    `keras-attention translate RUN --beam-size 8 "A dog runs."` reads the
    sentence after the option, and `--verbose` may come before or after the
    command. A usage error names the command's own `--help`. In a command with
    positional arguments, a files option takes its own words only
    (`--test-files SOURCE TARGET`, or one file with `--dataset tsv`):
    `evaluate --test-files a.en a.de runs/x` reads the translator `runs/x`. In
    `train`, a third file is refused by `TrainConfig`'s check. Without a
    command, or with anything but `--verbose` before it, the program's parser
    answers as usual (`--help`, `--version`, errors).
    """
    parser = build_parser()
    argv = list(argv)
    end = argv.index("--") if "--" in argv else len(argv)  # after "--" every word is an argument
    at = next((i for i, word in enumerate(argv[:end]) if word in parser.commands), None)
    if at is None or any(word != "--verbose" for word in argv[:at]):
        return parser.parse_args(argv)
    command = parser.commands[argv[at]]
    words = argv[at + 1:]
    if any(not action.option_strings for action in command._actions):  # a command with positional arguments
        words = _files_last(words)
    args = _parse_noting_given(command, words)
    args.command = argv[at]
    args.verbose = "--verbose" in argv[:at] or getattr(args, "verbose", False)
    return args


class _Unset:
    """What a flag holds until the command line sets it (argparse fills in a default only where there is none)."""


def _parse_noting_given(command, words):
    """`command`'s arguments from `words`, with `given`: the names of the flags the words set (a flag left
    at its default and one given its default value differ: a contradiction names only what was given).
    Actions that read the value before them (append, count) would see the marker: none is used."""
    unset = _Unset()
    names = [action.dest for action in command._actions if action.dest != argparse.SUPPRESS]
    args = command.parse_intermixed_args(words, namespace=argparse.Namespace(**dict.fromkeys(names, unset)))
    args.given = frozenset(name for name in names if getattr(args, name) is not unset)
    for action in command._actions:
        if getattr(args, action.dest, None) is not unset:
            continue
        default = action.default
        if default == argparse.SUPPRESS:  # argparse sets no attribute for these (--help, --verbose)
            delattr(args, action.dest)
            continue
        if isinstance(default, str) and action.type is not None:  # as argparse converts a default string
            default = action.type(default)
        setattr(args, action.dest, default)
    return args


FILE_OPTIONS = ("--train-files", "--valid-files", "--test-files")


def _files_last(words):
    """`words` with each files option and its own words (two, or one with `--dataset tsv`) moved to the end,
    so that the words after them are read as positional arguments: argparse's `nargs="+"` would take them all."""
    end = words.index("--") if "--" in words else len(words)
    dataset = None
    for i, word in enumerate(words[:end]):  # the last one counts, as for argparse
        name, equals, value = word.partition("=")
        if _abbreviates(name, "--dataset", "--datas"):  # not --data (--data-dir)
            dataset = value if equals else (words[i + 1] if i + 1 < end else None)
    room = 1 if dataset == "tsv" else 2
    rest, files, taken = [], [], None
    for word in words[:end]:
        if word.startswith("-"):
            taken = 0 if any(_abbreviates(word, option, option[:5]) for option in FILE_OPTIONS) else None
        elif taken is not None and taken < room:
            taken += 1
        else:
            taken = None
            rest.append(word)
            continue
        (files if taken is not None else rest).append(word)
    return rest + files + words[end:]


def _abbreviates(word, option, shortest):
    """Whether argparse reads `word` as `option`: the option itself or a prefix at least as long as `shortest`."""
    return option.startswith(word) and len(word) >= len(shortest)


def _add_train_command(commands):
    train = commands.add_parser(
        "train", help="train a translator with model.fit",
        epilog=_examples("keras-attention train --model transformer --preset small --dataset multi30k "
                         "--source en --target de --epochs 20 --output runs/en-de"))
    train.add_argument("--model", default=TRAIN.model, choices=MODEL_KINDS,
                       help="the Transformer, or a recurrent encoder-decoder with Bahdanau's, Luong's or no attention")
    train.add_argument("--preset", default=TRAIN.preset, choices=PRESET_NAMES,
                       help="the model's size: tiny (a Transformer of 2+2 layers of width 128, or RNNs of 128 "
                            "units) trains in minutes on a CPU; base and big are the paper's Transformers")
    _add_data_flags(train)
    _add_corpus_flags(train)
    train.add_argument("--cache-limit", type=checked("cache_limit"), default=TRAIN.cache_limit, metavar="PAIRS",
                       help="corpora up to this size are tokenized once and held in memory; "
                            "larger ones stream from disk")
    train.add_argument("--max-test-examples", type=checked("max_test_examples"), metavar="N",
                       help="score only the first N test pairs after training (quick runs)")
    _add_training_flags(train)
    train.add_argument("--backup-every-steps", type=checked("backup_every_steps"), metavar="N",
                       help="back up every N steps (default: each epoch); run again with --resume to continue")
    again = train.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue the run in --output from its backup (start one if there is none)")
    again.add_argument("--overwrite", action="store_true",
                       help="start again in an --output that holds a run; the old one is deleted once "
                            "the new one has finished")
    train.add_argument("--keep-backup", action="store_true",
                       help="keep OUTPUT/backup after the run: --resume with more --epochs extends it")
    train.add_argument("--keep-checkpoints", type=checked("keep_checkpoints"), default=TRAIN.keep_checkpoints,
                       metavar="N",
                       help="keep the last N epochs' weights in OUTPUT/checkpoints (0: none)")
    train.add_argument("--bleu-sample", type=checked("bleu_sample"), default=TRAIN.bleu_sample, metavar="N",
                       help="validation sentences translated after each epoch for its BLEU (0: none)")
    train.add_argument("--share-embeddings", action="store_true",
                       help="Transformer: one embedding for source, target and output (needs --joint-vocabulary)")
    train.add_argument("--output", default=TRAIN.output_dir, help="the run folder")


def _add_prepare_command(commands):
    prepare = commands.add_parser(
        "prepare", help="tokenize a corpus once into sharded TFRecords for `train --data-dir`",
        epilog=_examples("keras-attention prepare --dataset files --train-files 'train.*.en.gz' "
                         "'train.*.de.gz' --valid-files dev.en dev.de --output prepared/mine"))
    _add_data_flags(prepare)
    _add_corpus_flags(prepare)
    prepare.add_argument("--shard-size", type=checked("shard_size"), default=SHARD_SIZE, metavar="PAIRS",
                         help="pairs per shard, about; at least one shard per worker")
    prepare.add_argument("--output", required=True, help="a new or empty folder")
    prepare.add_argument("--overwrite", action="store_true", help="replace a prepared corpus in --output")


def _add_evaluate_command(commands):
    evaluate = commands.add_parser(
        "evaluate", help="BLEU and chrF of a saved translator",
        epilog=_examples("keras-attention evaluate runs/en-de/translator --split test --method beam --beam-size 4"))
    evaluate.add_argument("translator", help="a run folder (from train) or its translator/ folder")
    _add_data_flags(evaluate, evaluate=True)
    evaluate.add_argument("--split", default="test", choices=("train", "valid", "test"), help="the split to score")
    evaluate.add_argument("--max-examples", type=checked("max_examples"), metavar="N",
                          help="score only the first N pairs of the split (default: all)")
    add_translation_flags(evaluate)


def _add_translator_and_sentences(parser):
    parser.add_argument("translator", help="a run folder (from train) or its translator/ folder")
    parser.add_argument("sentences", nargs="*", help="sentences; read from stdin when none")


def _add_translate_command(commands):
    translate = commands.add_parser(
        "translate", help="translate sentences (arguments or stdin, one a line)",
        epilog=_examples("keras-attention translate runs/en-de/translator \"A dog runs in the park.\" --method beam",
                         "keras-attention translate runs/en-de/translator < sentences.txt"))
    _add_translator_and_sentences(translate)
    add_translation_flags(translate)
    translate.add_argument("--plot-attention", metavar="FILE.png",
                           help="save the attention map of the first sentence that is not empty")
    translate.add_argument("--html", metavar="FILE.html",
                           help="also write the attention explorer page of the sentences (greedy or beam)")


def _add_explain_command(commands):
    explain = commands.add_parser(
        "explain", help="write an interactive page of every attention weight of some translations",
        epilog=_examples("keras-attention explain runs/en-de \"A dog runs in the park.\" -o attention.html",
                         "keras-attention explain runs/en-de -o attention.html < sentences.txt"))
    _add_translator_and_sentences(explain)
    explain.add_argument("-o", "--output", required=True, metavar="FILE.html", help="the page to write")
    add_decoding_options(explain.add_argument_group("decoding"), ("method", "beam_size", "length_penalty"),
                         methods=SEARCH_METHODS)


def _add_demo_command(commands):
    demo = commands.add_parser(
        "demo", help="train a small attention model, report BLEU, translate a few sentences and save the "
                     "translator (replacing an earlier demo's run, and no other)",
        epilog=_examples("keras-attention demo --output runs/demo"))
    demo.add_argument("--output", default="runs/demo",
                      help="the run folder (an earlier demo's run there is replaced; any other run is kept and "
                           "the demo refuses the folder)")
    demo.add_argument("--quick", action="store_true", help="a tiny run for tests (seconds, not minutes)")
    demo.add_argument("--data-dir", help=f"the Multi30k folder (default: ${DATA_ENV_VAR}, then the Keras cache; "
                      "without Multi30k the demo learns the generated dates corpus)")


def _add_average_checkpoints_command(commands):
    average = commands.add_parser(
        "average-checkpoints", help="average the weights of several checkpoints",
        epilog=_examples("keras-attention average-checkpoints runs/en-de/checkpoints/epoch-01[6-9].weights.h5 "
                         "runs/en-de/checkpoints/epoch-020.weights.h5 --translator runs/en-de/translator "
                         "--output runs/en-de/translator-averaged"))
    average.add_argument("checkpoints", nargs="+", metavar="CKPT", help=".weights.h5 or .keras files")
    average.add_argument("--output", required=True,
                         help="a .weights.h5 or .keras file; with --translator, a new translator folder")
    average.add_argument("--translator", help="a translator folder whose model gets the averaged weights")
    average.add_argument("--overwrite", action="store_true", help="replace an existing --output")


# The note that starts the help of a flag one export format only reads.
ONLY_FOR = {"savedmodel": "SavedModel only: ", "ctranslate2": "CTranslate2 only: "}


def _add_export_command(commands):
    export = commands.add_parser(
        "export", help="write a SavedModel for TF Serving (strings in, translations out) or a CTranslate2 model",
        epilog=_examples("keras-attention export runs/en-de models/translator --method beam",
                         "keras-attention export runs/en-de --format ctranslate2 -o models/en-de-ct2 "
                         "--quantization int8"))
    export.add_argument("translator", help="a run folder (from train) or its translator/ folder")
    export.add_argument("output_dir", nargs="?",
                        help="SavedModel: the model's base folder (the SavedModel goes to OUTPUT_DIR/VERSION); "
                             "CTranslate2: the model folder")
    export.add_argument("-o", "--output", dest="output_flag", metavar="OUTPUT_DIR", help="the same as OUTPUT_DIR")
    export.add_argument("--format", default="savedmodel", choices=("savedmodel", "ctranslate2"),
                        help="a SavedModel for TF Serving, or a CTranslate2 model folder")
    add_decoding_options(export.add_argument_group("decoding"),
                         ("method", "beam_size", "length_penalty", "max_length"),
                         defaults=EXPORT_DEFAULTS, methods=SEARCH_METHODS, note=ONLY_FOR["savedmodel"])
    export.add_argument("--jit-compile", action="store_true",
                        help=f"{ONLY_FOR['savedmodel']}decode with XLA (TF Serving on a CPU then needs "
                             "--xla_cpu_compilation_enabled=true)")
    export.add_argument("--version", type=checked("version"),
                        help=f"{ONLY_FOR['savedmodel']}version folder (default: the next free number, 1 at first)")
    export.add_argument("--quantization", choices=QUANTIZATIONS,
                        help=f"{ONLY_FOR['ctranslate2']}weight type (default: float32)")
    export.add_argument("--overwrite", action="store_true",
                        help=f"{ONLY_FOR['ctranslate2']}replace the CTranslate2 export in -o "
                             "(never a folder of anything else)")
    # Each format's own flags, found by their help's note: export refuses those of the other format.
    export.set_defaults(format_flags={
        name: {action.dest: max(action.option_strings, key=len) for action in export._actions
               if (action.help or "").startswith(note)}
        for name, note in ONLY_FOR.items()})
