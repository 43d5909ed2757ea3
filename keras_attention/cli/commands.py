"""`keras-attention`'s commands: train, evaluate, translate, export, and a one-command demo."""

import contextlib
import os
import re
import sys
import threading
import warnings

from keras_attention.base.corpus_files import is_prepared
from keras_attention.base.files import RunPaths, check_output_file, read_translator_config, translator_folder
from keras_attention.base.options import DATASETS
from keras_attention.base.tensorflow_only import BackendError, require_tensorflow
from keras_attention.base.validation import TruncationWarning
from keras_attention.base.xla_cache import use_xla_cache
from keras_attention.cli.arguments import parse_command_line
from keras_attention.cli.configs import config_from_args, corpus_config, data_config
from keras_attention.cli.ctrl_c import resend_dropped_ctrl_c
from keras_attention.cli.decoding_flags import options_from_args
from keras_attention.decoding.options import EXPORT_DEFAULTS
from keras_attention.cli.reporting import print_summary


def _argument_text(text, number):
    """A command-line sentence as valid text: bytes that were not UTF-8 replaced, with a warning."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # Python keeps undecodable argv bytes as lone surrogates
        raw = os.fsencode(text)
        print(f"warning: sentence {number} on the command line is not valid UTF-8; undecodable bytes "
              "replaced with U+FFFD", file=sys.stderr)
        return raw.decode("utf-8", errors="replace")


def _read_stdin_lines():
    """Lines of stdin as str; bytes that are not UTF-8 are replaced, with a warning."""
    lines = []
    for number, raw in enumerate(sys.stdin.buffer.read().splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            print(f"warning: stdin line {number} is not valid UTF-8 ({error.reason} at byte "
                  f"{error.start}); undecodable bytes replaced with U+FFFD", file=sys.stderr)
            line = raw.decode("utf-8", errors="replace")
        lines.append(line)
    return lines


def main(argv=None):
    args = parse_command_line(sys.argv[1:] if argv is None else argv)
    quiet = contextlib.nullcontext() if args.verbose or argv is not None else _without_tensorflow_log_lines()
    try:
        with quiet, resend_dropped_ctrl_c(), _one_truncation_line():
            return _run(args)
    except (ValueError, FileNotFoundError, OSError, ImportError, BackendError) as error:
        print(f"keras-attention {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nkeras-attention {args.command}: interrupted{_how_to_go_on(args)}", file=sys.stderr)
        return 130  # 128 + SIGINT, as shells report it


@contextlib.contextmanager
def _one_truncation_line():
    """The command's truncation warnings (a translator gives one a call: every BLEU pass, every batch) summed
    into one line at its end; any other warning is one line too (`warning: ...`), without Python's file, line
    and source line."""
    counts = {"truncated": 0, "total": 0, "limits": set()}

    def count(message, category, *args, **kwargs):
        if not isinstance(message, TruncationWarning):
            print(f"warning: {' '.join(str(message).split())}", file=sys.stderr)
            return
        counts["truncated"] += message.truncated
        counts["total"] += message.total
        counts["limits"].add(message.max_source_length)

    with warnings.catch_warnings():
        warnings.simplefilter("always", TruncationWarning)
        warnings.showwarning = count
        try:
            yield
        finally:
            if counts["truncated"]:
                limit = "/".join(str(n) for n in sorted(counts["limits"]))
                print(f"warning: {counts['truncated']:,} of {counts['total']:,} translations had a source "
                      f"longer than the translator's max_source_length={limit} tokens; those sources were truncated",
                      file=sys.stderr)


# TensorFlow's C++ log lines ("I0000 00:00:1795602961.909271  3047 port.cc:153] ...") and
# the notice absl prints before them. TensorFlow writes them straight to file
# descriptor 2, at import and while ops run, whatever `TF_CPP_MIN_LOG_LEVEL` says.
_TF_LOG_LINE = re.compile(rb"^([IWEF]\d{4} [\d:.]+ +\d+ [\w./-]+:\d+\]|"
                          rb"WARNING: All log messages before absl::InitializeLog\(\) is called)")


@contextlib.contextmanager
def _without_tensorflow_log_lines():
    """Route file descriptor 2 through a filter that drops TensorFlow's C++ log lines.

    Everything else written to stderr (our messages, Python warnings,
    tracebacks) passes unchanged, line by line; the filter drains before the
    block returns.
    """
    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    copy_to = os.dup(real)  # the thread's own descriptor: `real` may be closed before the thread starts

    def copy():
        with os.fdopen(read_end, "rb") as lines, os.fdopen(copy_to, "wb", buffering=0) as out:
            for line in lines:
                if not _TF_LOG_LINE.match(line):
                    out.write(line)

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # closes the pipe's last write end: the filter sees the end and stops
        os.close(real)
        thread.join(timeout=10)


def _how_to_go_on(args):
    """For an interrupted `train`: where its backup is and how to continue from it."""
    if args.command != "train":
        return "."
    backup = RunPaths(args.output).backup
    if os.path.isdir(backup):
        return f"; the last backup is in {backup}: run the same command with --resume to continue."
    return f"; no backup was written yet, so {args.output} is as it was before."


_LOADS_A_TRANSLATOR = ("translate", "explain", "evaluate", "export")


def _run(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _check_engine_flags(args)
    if _compiles_with_xla(args) and not args.no_xla_cache:
        use_xla_cache(args.xla_cache)  # before TensorFlow first compiles
    require_tensorflow("The command line")  # reads the backend without starting TensorFlow
    if args.command in _LOADS_A_TRANSLATOR and getattr(args, "engine", "keras") == "keras":
        read_translator_config(translator_folder(args.translator))  # a folder without one: before TensorFlow
    verbs = {"train": _train, "prepare": _prepare, "demo": _demo, "average-checkpoints": _average,
             "export": _export, "explain": _explain, "evaluate": _evaluate, "translate": _translate}
    return verbs[args.command](args)


def _check_engine_flags(args):
    """Refuse a flag that the engine or compiler asked for would ignore without a word."""
    if getattr(args, "compute_type", None) and args.engine == "keras":
        raise ValueError("--compute-type sets CTranslate2's compute type: add --engine ctranslate2 (with a folder "
                         "from export --format ctranslate2), or leave it out. "
                         f"Received: --compute-type {args.compute_type}")
    if not hasattr(args, "no_xla_cache") or _compiles_with_xla(args):
        return
    given = [flag for flag, value in (("--xla-cache", args.xla_cache), ("--no-xla-cache", args.no_xla_cache))
             if value]
    if not given:
        return
    if getattr(args, "engine", "keras") == "ctranslate2":
        raise ValueError(f"{given[0]} is about XLA's compiled programs, which --engine ctranslate2 does not use: "
                         f"leave {given[0]} out.")
    fix = "leave out --no-jit" if args.command == "train" else "add --jit-compile"
    raise ValueError(f"{given[0]} is about XLA's compiled programs, and this command does not compile "
                     f"with XLA: {fix}, or leave {given[0]} out.")


def _compiles_with_xla(args):
    """Whether the command compiles with XLA (the commands that do have the --xla-cache flags)."""
    if not hasattr(args, "no_xla_cache"):
        return False
    return not args.no_jit if args.command == "train" else args.jit_compile


def _train(args):
    config = config_from_args(args)
    config.check_paths()  # before TensorFlow's seconds of import
    from keras_attention.training.recipe import train

    # Progress bars for a terminal; one line an epoch for a log file.
    _, results = train(config, verbose=1 if sys.stdout.isatty() else 2)
    print_summary(results)
    print(f"saved: {RunPaths(args.output).translator}")
    return 0


def _demo(args):
    from keras_attention.cli.demo import run_demo

    return run_demo(args.output, quick=args.quick, data_dir=args.data_dir)


def _load_translator(args):
    """The translator a decoding verb names: a saved Keras translator, or a CTranslate2 export."""
    if getattr(args, "engine", "keras") == "ctranslate2":
        return _ctranslate2_translator(args)
    from keras_attention.decoding.translator import Translator

    return Translator.load(args.translator, jit_compile=getattr(args, "jit_compile", False))


def _sentences(args):
    """The sentences given on the command line, or else stdin's lines."""
    return [_argument_text(s, i) for i, s in enumerate(args.sentences, 1)] or _read_stdin_lines()


def _explain(args):
    check_output_file(args.output)  # before any work
    translator = _load_translator(args)
    _write_page(translator, _sentences(args), args.output, options_from_args(args))
    return 0


def _evaluate(args):
    data_config(args).check_paths(args.split)  # before TensorFlow's seconds of import
    keras_engine = getattr(args, "engine", "keras") == "keras"
    if keras_engine:  # its metadata is read without TensorFlow; a CTranslate2 export's once loaded
        _check_test_data(args, read_translator_config(translator_folder(args.translator)).get("metadata") or {})
    from keras_attention.training.corpus import load_splits
    from keras_attention.training.evaluation import evaluate_bleu

    translator = _load_translator(args)
    if not keras_engine:
        _check_test_data(args, translator.metadata)
    args.source, args.target = _languages(args, translator)
    splits, description = load_splits(data_config(args), needed=(args.split,))
    pairs = dict(zip(("train", "valid", "test"), splits))[args.split]
    if pairs is None:
        raise ValueError(f"No {args.split} split for this data set. Received: --split {args.split}")
    scores = evaluate_bleu(translator, pairs, options_from_args(args), max_examples=args.max_examples)
    print(f"{description}, {args.split}: BLEU {scores['bleu']:.2f} (cased, 13a), "
          f"{scores['bleu_lowercase']:.2f} (lower-cased), chrF {scores['chrf']:.2f}, "
          f"{scores['num_sentences']} sentences")
    print(f"sacreBLEU signature (cased): {scores['bleu_signature']}")
    return 0


def _check_test_data(args, metadata):
    """Without --dataset, evaluate scores Multi30k (or the prepared corpus in --data-dir): refuse that for a
    translator trained on other data (its `metadata`), whose scores there would mean nothing."""
    trained_on = metadata.get("dataset")
    if args.dataset or is_prepared(args.data_dir) or not trained_on or trained_on.startswith("Multi30k"):
        return
    if args.test_files or args.valid_files:
        hint = "--dataset files (or tsv) to read the files given"
    else:
        others = [name for name in DATASETS if name != "multi30k"]
        hint = (f"--dataset {', '.join(others[:-1])} or {others[-1]}, "
                "or --dataset multi30k to score it there anyway")
    raise ValueError(f"{args.translator} was trained on {trained_on}, and evaluate scores Multi30k unless "
                     f"--dataset names the test data: {hint}.")


def _translate(args):
    for path in (args.html, args.plot_attention):
        if path:
            check_output_file(path)  # before any work
    options = options_from_args(args)
    for flag in ("html", "plot_attention"):
        if getattr(args, flag) and options.method == "sample":
            raise ValueError(f"--{flag.replace('_', '-')} shows the attention of greedy or beam decoding. "
                             "Received: --method sample")
    translator = _load_translator(args)
    sentences = _sentences(args)
    result = translator.translate(sentences, options, return_attention=bool(args.plot_attention))
    for text in result.texts:
        print(text)
    first = next((i for i, sentence in enumerate(sentences) if sentence.strip()), None)  # an empty one has no map
    if args.plot_attention and first is None:
        print("warning: every sentence is empty, so there is no attention map to plot", file=sys.stderr)
    elif args.plot_attention:
        if result.attention is None:
            raise ValueError("This model has no attention to plot (a fixed-vector RNN).")
        from keras_attention.explain.plotting import plot_attention

        plot_attention(result.attention[first], result.source_tokens[first], result.target_tokens[first],
                       path=args.plot_attention)
        # Matplotlib adds ".png" to a name without a suffix.
        written = args.plot_attention if os.path.splitext(args.plot_attention)[1] else f"{args.plot_attention}.png"
        print(f"attention map: {written}", file=sys.stderr)
    if args.html:
        _write_page(translator, [s for s in sentences if s.strip()], args.html, options)
    return 0


def _write_page(translator, sentences, path, options):
    """The attention explorer page of `sentences` (a truncation is a warning and a note on the page)."""
    from keras_attention.explain import explain

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        page = explain(translator, sentences, options)
    for warning in caught:
        if isinstance(warning.message, TruncationWarning):
            warnings.warn(warning.message)  # into the command's one truncation line
        else:
            print(f"warning: {warning.message}", file=sys.stderr)
    page.save(path)
    print(f"attention explorer: {path} ({len(page.sentences)} sentences)", file=sys.stderr)


def _languages(args, translator):
    """`--source/--target`, defaulting to the translator's (then to `DataConfig`'s); a contradiction is an error."""
    known = translator.languages
    for flag, given, language in (("--source", args.source, known[0]), ("--target", args.target, known[1])):
        if given and language and given != language:
            raise ValueError(f"{args.translator} translates {known[0]}->{known[1]}; {flag} {given} "
                             f"contradicts it (leave {flag} out, or give {language}).")
    return args.source or known[0], args.target or known[1]


def _average(args):
    from keras_attention.training import averaging

    if not args.translator:
        averaging.average_checkpoints(args.checkpoints, args.output, overwrite=args.overwrite)
        print(f"average of {len(args.checkpoints)} checkpoints: {args.output}")
        return 0
    averaging.average_translator(args.translator, args.checkpoints, args.output, overwrite=args.overwrite)
    print(f"translator with the average of {len(args.checkpoints)} checkpoints: {args.output}")
    return 0


def _prepare(args):
    config = corpus_config(args)
    config.check_paths()  # before TensorFlow's seconds of import
    from keras_attention.training.preparation import prepare

    manifest = prepare(config, args.output, shard_size=args.shard_size, overwrite=args.overwrite)
    counts = manifest["counts"]
    skipped = ", ".join(f"{k} {v:,}" for k, v in counts.items() if k not in ("lines", "read", "kept") and v)
    read = f"read {counts['read']:,}, " if counts.get("read") else ""  # a generated corpus (dates) has no count
    print(f"prepared: {args.output}: {manifest['pairs']:,} pairs in {len(manifest['shards'])} shards "
          f"({manifest['seconds']:.0f} s); {read}skipped {skipped or 'none'}")
    print(f"train with: keras-attention train --data-dir {args.output} --output RUN_DIR")
    return 0


def _ctranslate2_translator(args):
    """`--engine ctranslate2`: the model folder given as TRANSLATOR; what it cannot do is an error."""
    if getattr(args, "plot_attention", None) or getattr(args, "html", None):
        raise ValueError("--plot-attention and --html need our decoder's attention weights: use --engine keras.")
    if args.jit_compile:
        raise ValueError("--jit-compile compiles our decoder (--engine keras); CTranslate2 has its own kernels.")
    from keras_attention.serving.ctranslate2_translator import CTranslate2Translator

    return CTranslate2Translator(args.translator, compute_type=args.compute_type or "default")


def _export_folder(args):
    given = [path for path in (args.output_dir, args.output_flag) if path]
    if not given:
        raise ValueError("export needs an output folder: give OUTPUT_DIR or -o OUTPUT_DIR.")
    if len(given) == 2 and given[0] != given[1]:
        raise ValueError(f"Two output folders given ({given[0]} and -o {given[1]}): give one.")
    return given[0]


def _check_format_flags(args):
    """Refuse a flag of the other format (`format_flags`, from arguments.py), which would be ignored without a word."""
    other = "savedmodel" if args.format == "ctranslate2" else "ctranslate2"
    given = [flag for name, flag in args.format_flags[other].items() if getattr(args, name) not in (None, False)]
    if given:
        why = " (CTranslate2 is told how to decode when it translates)" if args.format == "ctranslate2" else ""
        raise ValueError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to --format "
                         f"{other} only{why}.")


def _export(args):
    from keras_attention.decoding.translator import Translator

    output_dir = _export_folder(args)
    _check_format_flags(args)
    if args.format == "ctranslate2":
        from keras_attention.serving.ctranslate2_export import export_ctranslate2

        translator = Translator.load(args.translator)
        path = export_ctranslate2(translator, output_dir, quantization=args.quantization, overwrite=args.overwrite)
        print(f"exported: {path} (CTranslate2, {args.quantization or 'float32'} weights); translate with: "
              f"keras-attention translate {path} --engine ctranslate2")
        return 0
    from keras_attention.serving import export

    translator = Translator.load(args.translator)
    options = options_from_args(args, EXPORT_DEFAULTS)
    path = export(translator, output_dir, options, version=args.version, jit_compile=args.jit_compile)
    xla = ", compiled with XLA" if args.jit_compile else ""
    print(f"exported: {path} (signatures serving_default and translate_ids, {options.method} decoding{xla})")
    return 0
