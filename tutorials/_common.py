"""What every tutorial shares: the QUICK switch, the figure folder, the Multi30k set-up.

Environment variables:

- `QUICK=1` shrinks the data and the training to a few hundred sentence pairs
  and one epoch, so a tutorial runs in well under a minute on a CPU (the
  tests and CI use it). The numbers it prints are then only smoke: an
  untrained model translates badly.
- `TUTORIAL_OUTPUT_DIR` is where the figures go (default: `tutorials/figures`).
- `TUTORIAL_CACHE_DIR` is where trained translators are kept so that a later
  tutorial can reuse a model an earlier one trained with the same settings
  (default: `~/.keras/keras_attention_tutorials`). Delete it to retrain.
- `KERAS_ATTENTION_DATA` names the folder holding `multi30k/` (see
  `keras_attention.data.load_multi30k`; without it the files are downloaded).

Everything here is plain use of the library: `load_multi30k`,
`SubwordTokenizer.from_dataset`, `make_translation_dataset`, the models,
`compile_for_training` (the training recipe's optimizer, schedule, loss and
metric), `Translator` and `evaluate_bleu`.
"""

import dataclasses
import hashlib
import json
import os
import pathlib
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Two harmless Keras notes that every `fit` on a finite tf.data.Dataset prints.
warnings.filterwarnings("ignore", message=".*`shuffle=True` was passed.*")
warnings.filterwarnings("ignore", message=".*Your input ran out of data.*")

import keras  # noqa: E402

from keras_attention import data, models  # noqa: E402
from keras_attention.decoding.translator import Translator  # noqa: E402
from keras_attention.training.evaluation import evaluate_bleu  # noqa: E402
from keras_attention.training import (ModelConfig, OptimizationConfig, TrainConfig,  # noqa: E402
                                      compile_for_training)

QUICK = os.environ.get("QUICK", "").strip().lower() not in ("", "0", "false", "no")
HERE = pathlib.Path(__file__).resolve().parent
FIGURES = pathlib.Path(os.environ.get("TUTORIAL_OUTPUT_DIR") or HERE / "figures")
CACHE = pathlib.Path(
    os.environ.get("TUTORIAL_CACHE_DIR")
    or pathlib.Path(os.environ.get("KERAS_HOME", "~/.keras")).expanduser() / "keras_attention_tutorials"
)


def figure_path(name):
    """Where to save the figure `name` (a PNG file name); creates the folder."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    return str(FIGURES / name)


def start(title, seed=0):
    """Print the tutorial's title and mode, and fix the random seeds."""
    keras.utils.set_random_seed(seed)
    mode = "QUICK (tiny data, one epoch: the numbers are smoke, not results)" if QUICK else "full"
    try:
        figures = FIGURES.relative_to(pathlib.Path.cwd())
    except ValueError:
        figures = FIGURES
    print(f"{title}\nmode: {mode}\ndevice: {device_name()}\nfigures: {figures}")


def result(text):
    """Print the tutorial's headline result; `build_notebooks.py --index` puts it in the README's table."""
    print(f"result: {text}")


@dataclasses.dataclass(frozen=True)
class Settings:
    """One translation set-up, shared by tutorials 01, 02, 03 and 10."""

    source: str = "en"
    target: str = "de"
    train_pairs: int = None  # None: all 29,000
    test_pairs: int = 1000  # test_2016_flickr has 1,000
    vocab_size: int = 4000  # WordPiece pieces per language (upper bound)
    max_length: int = 40  # tokens, [START]/[END] included
    batch_size: int = 128
    rnn_epochs: int = 2
    transformer_epochs: int = 6
    rnn: dict = dataclasses.field(default_factory=lambda: dict(embedding_dim=128, units=256, dropout=0.1))
    transformer: dict = dataclasses.field(default_factory=lambda: dict(preset="tiny"))


SETTINGS = (
    Settings(
        train_pairs=256,
        test_pairs=60,
        vocab_size=1000,
        max_length=32,
        batch_size=32,
        rnn_epochs=1,
        transformer_epochs=1,
        rnn=dict(embedding_dim=16, units=32, dropout=0.0),
        transformer=dict(preset="tiny", num_layers=1, d_model=32, num_heads=4, intermediate_dim=64),
    )
    if QUICK
    else Settings()
)


@dataclasses.dataclass
class TranslationData:
    """Sentence pairs, tokenizers and batches of one `Settings`."""

    settings: Settings
    train_pairs: object  # tf.data.Dataset of (source, target) strings
    test_pairs: list  # [(source, target)] as str
    source_tokenizer: data.SubwordTokenizer
    target_tokenizer: data.SubwordTokenizer
    train_batches: object  # tf.data.Dataset of ((source_ids, target_in), target_out)


def _source_side(source, target):
    return source


def _target_side(source, target):
    return target


def load_translation_data(settings=SETTINGS):
    """Multi30k pairs -> WordPiece tokenizers -> padded, length-bucketed batches.

    Exactly the steps tutorial 01 walks through one by one.
    """
    train = data.load_multi30k(settings.source, settings.target, "train")
    if settings.train_pairs:
        train = train.take(settings.train_pairs)
    test = data.load_multi30k(settings.source, settings.target, "test").take(settings.test_pairs)
    test = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in test.as_numpy_iterator()]
    source_tokenizer = data.SubwordTokenizer.from_dataset(train.map(_source_side), settings.vocab_size)
    target_tokenizer = data.SubwordTokenizer.from_dataset(train.map(_target_side), settings.vocab_size)
    batches = data.make_translation_dataset(
        train,
        source_tokenizer,
        target_tokenizer,
        settings.batch_size,
        max_length=settings.max_length,
        bucket_boundaries="auto",
        shuffle=True,
        seed=0,
    )
    return TranslationData(settings, train, test, source_tokenizer, target_tokenizer, batches)


def build_translation_model(kind, translation_data, **overrides):
    """`Seq2SeqRNN` (kind "rnn", "bahdanau", "luong") or `Transformer` ("transformer")
    of the sizes in the settings; `overrides` replace constructor arguments."""
    s = translation_data.settings
    vocab = (translation_data.source_tokenizer.vocab_size, translation_data.target_tokenizer.vocab_size)
    if kind == "transformer":
        options = {**s.transformer, **overrides}
        return models.Transformer.from_preset(options.pop("preset"), *vocab, max_length=s.max_length, **options)
    attention = None if kind == "rnn" else kind
    return models.Seq2SeqRNN(*vocab, attention=attention, **{**s.rnn, **overrides})


def compile_translation_model(model, kind, steps_per_epoch, epochs, label_smoothing=0.1, learning_rate=None):
    """Compile a built `model` with the training recipe (`training.compile_for_training`).

    Adam with the Transformer paper's settings (beta_2 = 0.98), gradients
    clipped at norm 1; the Transformer's warm-up schedule (5% of the steps,
    peak 1e-3) or the RNNs' fixed 1e-3, or a fixed `learning_rate`; the masked
    cross-entropy with label smoothing and masked token accuracy. Without XLA:
    it would compile once per batch shape, minutes of compiling for a run of minutes.
    """
    config = TrainConfig(model=ModelConfig(kind=kind), optimization=OptimizationConfig(
        epochs=epochs, learning_rate=learning_rate, label_smoothing=label_smoothing))
    compile_for_training(model, config, steps_per_epoch, jit_compile=False)


def _cache_key(kind, settings, extra):
    """Settings, training options and the source code of the model and of the recipe
    that compiles it: a change to any of them means a new model."""
    module = models.Transformer if kind == "transformer" else models.Seq2SeqRNN
    code = [sys.modules[name] for name in (module.__module__, compile_for_training.__module__,
                                           "keras_attention.base.options")]
    source = [pathlib.Path(m.__file__).read_text(encoding="utf-8") for m in code]
    text = json.dumps([kind, dataclasses.asdict(settings), extra, source], sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def device_name():
    """What the tutorials' timings ran on, for the lines that print them."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return f"{len(gpus)} GPU(s)" if gpus else f"a CPU with {os.cpu_count()} cores"


def _epochs(kind, settings, epochs=None):
    """`epochs`, or the settings' default for `kind` (the Transformer's or the RNNs')."""
    return epochs or (settings.transformer_epochs if kind == "transformer" else settings.rnn_epochs)


def _cache_folder(kind, settings, epochs, extra):
    return CACHE / _cache_key(kind, settings, dict(extra, epochs=epochs))


def keep_translator(kind, translator, history, settings=SETTINGS, epochs=None, **extra):
    """Keep a translator trained in a tutorial, so later tutorials reuse it.

    `train_translator(kind, ...)` with the same settings then reloads it
    instead of training again. `history`: the `History.history` dict, plus
    `train_seconds`.
    """
    epochs = _epochs(kind, settings, epochs)
    folder = _cache_folder(kind, settings, epochs, extra)
    translator.save(str(folder))  # replaces an earlier copy
    (folder / "history.json").write_text(json.dumps(history))


def _built_model(kind, translation_data):
    """A new model of `kind` with its weights made, and the batches of one epoch."""
    model = build_translation_model(kind, translation_data)
    (source_ids, target_in), _ = next(iter(translation_data.train_batches))
    model((source_ids[:1], target_in[:1]))  # the weights, which the optimizer is built for
    return model, sum(1 for _ in translation_data.train_batches)


def _translator(model, translation_data):
    return Translator(model, translation_data.source_tokenizer, translation_data.target_tokenizer,
                      max_source_length=128, max_target_length=translation_data.settings.max_length)


def train_translator(kind, translation_data, epochs=None, verbose=2, **extra):
    """Train (or reload from the cache) one model of `kind`; return `(translator, history)`.

    `history` is the `History.history` dict of the run that made the model
    (also when it comes from the cache), plus `train_seconds`.
    """
    s = translation_data.settings
    epochs = _epochs(kind, s, epochs)
    folder = _cache_folder(kind, s, epochs, extra)
    if (folder / "history.json").exists():
        history = json.loads((folder / "history.json").read_text())
        print(f"{kind}: trained earlier with the same settings, reloaded from the tutorial cache: "
              f"{len(history['loss'])} epoch(s) in {history['train_seconds']:.0f} s, loss by epoch "
              f"{[round(x, 3) for x in history['loss']]}, token accuracy {[round(x, 3) for x in history['token_accuracy']]}")
        return Translator.load(str(folder)), history

    model, steps = _built_model(kind, translation_data)
    compile_translation_model(model, kind, steps, epochs, **extra)
    started = time.time()
    # Repeated, with one pass an epoch: one tf.data iterator for the run (tutorial 01 says why).
    history = model.fit(translation_data.train_batches.repeat(), steps_per_epoch=steps, epochs=epochs,
                        verbose=verbose)
    history = dict(history.history, train_seconds=round(time.time() - started, 1))
    print(f"{kind}: {epochs} epoch(s) of {steps} steps in {history['train_seconds']:.0f} s")
    translator = _translator(model, translation_data)
    keep_translator(kind, translator, history, s, epochs, **extra)
    return translator, history


# Source-length buckets (in words) for BLEU by length: the Multi30k test set
# has about 280, 350, 220 and 150 sentences in them.
LENGTH_BUCKETS = ((1, 9), (10, 12), (13, 15), (16, 99))


def bleu_by_length(translator, pairs, buckets=LENGTH_BUCKETS, **options):
    """`evaluate_bleu` on each source-length bucket: a list of
    `(label, number of sentences, BLEU, lower-cased BLEU)`."""
    rows = []
    for low, high in buckets:
        selected = [p for p in pairs if low <= len(p[0].split()) <= high]
        label = f"{low}-{high}" if high < 99 else f"{low}+"
        if not selected:
            rows.append((label, 0, float("nan"), float("nan")))
            continue
        scores = evaluate_bleu(translator, selected, **options)
        rows.append((label, len(selected), scores["bleu"], scores["bleu_lowercase"]))
    return rows


# The four translation models of the series, by the tutorial that introduces each.
SERIES = (("rnn", "RNN, fixed vector (01)"), ("bahdanau", "RNN + Bahdanau (02)"),
          ("luong", "RNN + Luong (03)"), ("transformer", "Transformer (10)"))


class TrainingClock(keras.callbacks.Callback):
    """Counts the seconds of training steps only, keeps the weights at `checkpoints`
    equally spaced times, and stops `fit` at the last, `seconds`.

    `kept` holds one dict a checkpoint: `seconds`, `steps`, `learning_rate` (the
    mean over the steps so far) and `weights`.
    """

    def __init__(self, seconds, checkpoints):
        super().__init__()
        self.marks = [seconds * (i + 1) / checkpoints for i in range(checkpoints)]
        self.elapsed, self.rates, self.kept = 0.0, [], []

    def on_train_batch_begin(self, batch, logs=None):
        # Read before the step: the optimizer's rate is the schedule's at the steps done so far, the coming one's.
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))
        self.started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.elapsed += time.perf_counter() - self.started
        if self.elapsed >= self.marks[len(self.kept)]:
            self.kept.append(dict(seconds=self.elapsed, steps=len(self.rates),
                                  learning_rate=sum(self.rates) / len(self.rates), weights=self.model.get_weights()))
            self.model.stop_training = len(self.kept) == len(self.marks)


def train_for_seconds(kind, translation_data, seconds, checkpoints=4, learning_rate=None, expected_steps=None):
    """Train a new model of `kind` for `seconds` of training steps; return `(translator, clock)`.

    `learning_rate`: None for the recipe's (the Transformer's warm-up schedule, laid
    over `expected_steps`; the RNNs' fixed 1e-3) or a fixed rate. `clock` is the
    `TrainingClock` with the weights at each checkpoint; the translator holds the last.
    """
    model, steps = _built_model(kind, translation_data)
    compile_translation_model(model, kind, expected_steps or steps, 1, learning_rate=learning_rate)
    clock = TrainingClock(seconds, checkpoints)
    model.fit(translation_data.train_batches.repeat(), steps_per_epoch=steps, epochs=10_000, verbose=0,
              callbacks=[clock])
    return _translator(model, translation_data), clock


def bleu_over_time(translator, clock, pairs):
    """BLEU on `pairs` (greedy) with the weights of each of `clock`'s checkpoints;
    leaves the translator with the last."""
    scores = []
    for checkpoint in clock.kept:
        translator.model.set_weights(checkpoint["weights"])
        scores.append(evaluate_bleu(translator, pairs)["bleu"])
    return scores
