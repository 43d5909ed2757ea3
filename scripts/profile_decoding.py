"""Where decoding time goes: the TensorFlow ops of our translator, grouped by what they do.

Translates the same sentences greedily and with beam search, one sentence at a
time and in batches of 32, under the TensorFlow profiler, with the in-memory
`Translator` and with its SavedModel export (the same decoding code, traced
into the signature), and sums the time of every op by category:

    tokenization       WordPiece and detokenizing ops (strings, ragged tensors, vocabulary lookups)
    encoder            the encoder blocks over the source
    embedding          the target token embedding, one token a step
    self-attention     the decoder blocks' self-attention (projections, scores, softmax)
    cache updates      writes into the self-attention cache (dynamic-update-slice)
    cross-attention    the decoder blocks' attention over the source, its keys and values included
    feed-forward       the decoder blocks' two dense layers
    layer norm         every normalisation of the decoder
    output projection  the logits over the target vocabulary
    log-softmax        the logits' normalisation
    search             the rest of the loop: top-k, the beams' scores, parents and finished flags
    other              ops outside these (eager ops around the loop, shape arithmetic, constants)

and the idle time: wall time during which no op ran (TensorFlow's executor
between ops, Python around the calls). Times are per generated target
token; ops that ran on both threads at once count twice, so the categories may
add up to more than the wall time. CTranslate2's own profiler is not in its
Python wheel, so for CTranslate2 the script gives its wall time per token on
the same sentences, as the reference.

    python scripts/profile_decoding.py runs/en-de --json profile.json

A profile is a tool for finding where to work; the speed figures the docs
report come from `scripts/benchmark_inference.py`.
"""

import argparse
import collections
import os
import re
import shutil
import sys
import tempfile
import time

CATEGORIES = ("tokenization", "encoder", "embedding", "self-attention", "cache updates", "cross-attention",
              "feed-forward", "layer norm", "output projection", "log-softmax", "search", "other")
TOKENIZER_OPS = {"WordpieceTokenizeWithOffsets", "RaggedGather", "RaggedTensorToTensor", "RaggedRange",
                 "StaticRegexReplace", "StaticRegexFullMatch", "NormalizeUTF8", "UnicodeTranscode", "StringSplitV2",
                 "StringJoin", "UnsortedSegmentJoin", "LookupTableFindV2", "StringStrip", "StringLength",
                 "ReduceJoin", "RegexSplitWithOffsets", "UnicodeDecodeWithOffsets", "UnicodeEncode",
                 "StringLower", "RegexReplace", "RaggedTensorFromVariant", "RaggedTensorToVariant"}
CACHE_WRITES = {"XlaDynamicUpdateSlice", "DynamicUpdateSlice", "TensorScatterUpdate", "ResourceScatterUpdate"}
METHODS = {"greedy": {}, "beam": {"beam_size": 4}}
BATCHES = (1, 32)


def categorize(name, op_type):
    """The category of the op `name` (its scope path) of type `op_type`."""
    if op_type in TOKENIZER_OPS:
        return "tokenization"
    if op_type in CACHE_WRITES:
        return "cache updates"
    path = re.sub(r"(?:_\d+)+(?=/|$)", "", name)  # encoder_0_1/self_attention_1 -> encoder/self_attention
    in_loop = path.startswith("while/") or "/while/" in path
    if not in_loop and re.search(r"(^|/)encoder(/|$)", path):  # its blocks' attention and norms included
        return "encoder"
    if "_norm/" in path or path.endswith("_norm"):
        return "layer norm"
    if op_type == "LogSoftmax":  # greedy's and sampling's, at the loop's top level
        return "log-softmax"
    for scope, category in (("self_attention", "self-attention"), ("cross_attention", "cross-attention"),
                            ("feedforward", "feed-forward"), ("output_projection", "output projection"),
                            ("target_embedding", "embedding"), ("ReduceLogSumExp", "log-softmax"),
                            ("log_softmax", "log-softmax")):
        if re.search(rf"(^|/){scope}\w*(/|$)", path):  # feedforward_intermediate/, self_attention/
            return category
    if not in_loop and re.search(r"(^|/)(key|value)/", path):  # the cross-attention keys and values, once a batch
        return "cross-attention"
    return "search" if in_loop else "other"


def op_events(trace_dir):
    """`(name, op type, thread, start ps, end ps)` of the TensorFlow ops in the newest profile of `trace_dir`."""
    from timing import read_trace

    events = []
    for plane in read_trace(trace_dir).planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            origin = line.timestamp_ns * 1000
            for event in line.events:
                label = plane.event_metadata[event.metadata_id].name
                if label.startswith("EagerLocalExecute: "):  # an op run eagerly, outside any function
                    op_type = label.split(": ", 1)[1]
                    if op_type.startswith("__inference") or op_type == "_EagerConst":
                        continue  # a whole function (its ops have events) or a constant
                    name = op_type
                elif re.fullmatch(r"[\w./\-]+:\w+", label):  # "scope/name:OpType", an op of a function
                    name, op_type = label.rsplit(":", 1)
                else:
                    continue
                start = origin + event.offset_ps
                events.append((name, op_type, (plane.id, line.id), start, start + event.duration_ps))
    return events


def busy_time(events):
    """Time during which at least one of `events` ran."""
    spans = sorted((start, end) for *_, start, end in events)
    busy, reach = 0, None
    for start, end in spans:
        if reach is None or start > reach:
            busy, reach = busy + end - start, end
        elif end > reach:
            busy, reach = busy + end - reach, end
    return busy


def batches_of(sentences, size):
    return [sentences[i:i + size] for i in range(0, len(sentences), size)]


def cases(sentences, batch):
    """The sentences a case decodes: all in batches, an eighth (at least 4) one at a time."""
    return sentences if batch > 1 else sentences[:max(4, len(sentences) // 8)]


def profile(decode, sentences, batch, tokens):
    """Profile `decode(list of str)` over `sentences` in batches of `batch`; `tokens` target tokens come out."""
    import tensorflow as tf

    chunks = batches_of(sentences, batch)
    for chunk in chunks[:2]:
        decode(chunk)  # trace every shape first
    trace_dir = tempfile.mkdtemp(prefix="decode-profile-")
    tf.profiler.experimental.start(trace_dir)
    try:
        started = time.perf_counter()
        for chunk in chunks:
            decode(chunk)
        wall = time.perf_counter() - started
    finally:
        tf.profiler.experimental.stop()
    try:
        events = op_events(trace_dir)
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
    by_category = dict.fromkeys(CATEGORIES, 0.0)
    by_op = collections.Counter()
    for name, op_type, _, start, end in events:
        ms = (end - start) / 1e9
        by_category[categorize(name, op_type)] += ms
        by_op[f"{name}:{op_type}"] += ms
    per_token = lambda ms: ms / max(tokens, 1)  # noqa: E731
    busy = busy_time(events) / 1e9
    return dict(sentences=len(sentences), target_tokens=tokens, wall_ms_per_token=per_token(wall * 1e3),
                categories_ms_per_token={k: per_token(v) for k, v in by_category.items()},
                idle_ms_per_token=per_token(max(wall * 1e3 - busy, 0.0)),
                busiest_ops_ms_per_token={k: per_token(v) for k, v in by_op.most_common(15)})


def target_tokens(engine, sentences, batch, method):
    """How many target tokens `engine` (a `Translator` or `CTranslate2Translator`) writes, [END] included."""
    import numpy as np

    return sum(int(np.count_nonzero(engine.translate(chunk, method, **METHODS[method]).tokens))
               for chunk in batches_of(sentences, batch))


def saved_model_decoder(signature):
    import tensorflow as tf

    return lambda chunk: signature(sentences=tf.constant(chunk))


def multi30k_sources(translator, count):
    from keras_attention import data

    source, target = translator.languages
    pairs = data.load_multi30k(source or "en", target or "de", "test").take(count)
    return [s.decode("utf-8") for s, _ in pairs.as_numpy_iterator()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("translator", help="a translator or run folder")
    parser.add_argument("--sentences", type=int, default=128, help="test sentences decoded a case (default: 128)")
    parser.add_argument("--json", help="write the profile to this file")
    args = parser.parse_args(argv)

    import tensorflow as tf

    from keras_attention.decoding import Translator
    from keras_attention.serving import CTranslate2Translator, export, export_ctranslate2
    from timing import machine, write_json

    translator = Translator.load(args.translator)
    sentences = multi30k_sources(translator, args.sentences)
    results, scratch = [], tempfile.mkdtemp(prefix="decode-profile-exports-")
    try:
        for method in METHODS:
            path = export(translator, os.path.join(scratch, method), method, **METHODS[method])
            engines = {"translator": lambda chunk: translator.translate(chunk, method, **METHODS[method]),
                       "savedmodel": saved_model_decoder(tf.saved_model.load(path).signatures["serving_default"])}
            for batch in BATCHES:
                chosen = cases(sentences, batch)
                tokens = target_tokens(translator, chosen, batch, method)  # the export decodes the same tokens
                for engine, decode in engines.items():
                    row = dict(engine=engine, method=method, batch_size=batch,
                               **profile(decode, chosen, batch, tokens))
                    results.append(row)
                    top = sorted(row["categories_ms_per_token"].items(), key=lambda kv: -kv[1])[:4]
                    print(f"{engine:10s} {method:6s} batch {batch:2d}: {row['wall_ms_per_token']:.3f} ms a token; "
                          + ", ".join(f"{k} {v:.3f}" for k, v in top)
                          + f", no op running {row['idle_ms_per_token']:.3f}", flush=True)
        ct2 = ctranslate2_reference(translator, sentences, scratch, export_ctranslate2, CTranslate2Translator)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = dict(command="python scripts/profile_decoding.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  date=time.strftime("%Y-%m-%d"), machine=machine(),
                  device=tf.config.list_logical_devices()[-1].device_type, results=results, ctranslate2=ct2)
    if args.json:
        write_json(args.json, report)
    return report


def ctranslate2_reference(translator, sentences, scratch, export_ctranslate2, CTranslate2Translator):
    """CTranslate2's wall time per target token on the same sentences (its profiler is not in the wheel)."""
    try:
        engine = CTranslate2Translator(export_ctranslate2(translator, os.path.join(scratch, "ct2")))
    except (ImportError, ValueError) as error:
        return dict(available=False, reason=str(error))
    rows = []
    for method in METHODS:
        for batch in BATCHES:
            chosen = cases(sentences, batch)
            tokens = target_tokens(engine, chosen, batch, method)  # also the warm-up
            started = time.perf_counter()
            for chunk in batches_of(chosen, batch):
                engine.translate(chunk, method, **METHODS[method])
            rows.append(dict(method=method, batch_size=batch, target_tokens=tokens,
                             wall_ms_per_token=(time.perf_counter() - started) * 1e3 / max(tokens, 1)))
    return dict(available=True, profiler="not in the Python wheel: wall time only", results=rows)


if __name__ == "__main__":
    main()
