"""The training recipe's options: one joint vocabulary, one shared embedding, the learning-rate peak, a time
limit; the step traced once; case kept from the corpus to the translations."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding.translator import Translator
from keras_attention.serving import export
from keras_attention.training.recipe import TrainConfig, train

pytestmark = pytest.mark.xdist_group("recipe")  # one worker: `shared_run` is trained once

SENTENCES = ["3 January 2021", "Sunday, January 3rd, 2021", "dimanche 3 janvier 2021", "1/3/2021"]


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared")
    config = TrainConfig.from_flat(
        model="transformer", preset="tiny", dataset="dates", vocab_size=240, max_length=40, epochs=1,
        batch_size=32, max_train_examples=512, bleu_sample=0, jit_compile=False, keep_checkpoints=0,
        max_test_examples=50, joint_vocabulary=True, share_embeddings=True, output_dir=str(folder),
        overrides=dict(num_layers=1, d_model=32, num_heads=2, intermediate_dim=64),
    )
    translator, _ = train(config, verbose=0)
    return folder, translator


def test_one_vocabulary_serves_both_sides_and_round_trips(shared_run):
    folder, translator = shared_run
    source, target = translator.source_tokenizer, translator.target_tokenizer
    assert source.vocabulary == target.vocabulary
    # Both languages are covered: human dates (source side) and ISO dates (target side).
    ids = source.tokenize(tf.constant(SENTENCES + ["2021-01-03"])).flat_values.numpy()
    assert source.unk_id not in ids
    assert target.detokenize(target.tokenize(tf.constant(["2021-01-03"]))).numpy()[0] == b"2021-01-03"
    reloaded = Translator.load(str(folder / "translator"))
    assert reloaded.source_tokenizer.vocabulary == source.vocabulary == reloaded.target_tokenizer.vocabulary


def test_shared_embedding_is_one_matrix_and_survives_saving_and_export(shared_run, tmp_path):
    folder, translator = shared_run
    model = translator.model
    assert model.share_embeddings and model.source_embedding is model.target_embedding
    names = [v.path for v in model.weights if "embedding" in v.path and "position" not in v.path]
    assert len(names) == 1, names
    reloaded = Translator.load(str(folder / "translator"))
    assert reloaded.model.source_embedding is reloaded.model.target_embedding
    assert len(reloaded.model.weights) == len(model.weights)
    for saved, loaded in zip(model.weights, reloaded.model.weights):
        np.testing.assert_array_equal(loaded.numpy(), saved.numpy(), err_msg=saved.path)
    expected = translator(SENTENCES)
    assert reloaded(SENTENCES) == expected
    path = export(reloaded, str(tmp_path / "export"), method="greedy")
    served = tf.saved_model.load(path).signatures["serving_default"](sentences=tf.constant(SENTENCES))
    assert [t.decode() for t in served["translations"].numpy()] == expected


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(model="luong", joint_vocabulary=True), "--share-embeddings is for the Transformer"),
        (dict(model="transformer"), "add --joint-vocabulary"),
    ],
)
def test_shared_embeddings_refuse_what_cannot_share(options, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_flat(share_embeddings=True, **options)


@pytest.mark.parametrize("peak", [None, 3e-3])
def test_the_transformer_schedule_peaks_at_the_configured_rate_at_the_end_of_the_warm_up(peak):
    from keras_attention.models.transformer import Transformer
    from keras_attention.training.recipe import compile_for_training

    model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)
    config = TrainConfig.from_flat(model="transformer", epochs=2, warmup_steps=10, peak_learning_rate=peak)
    compile_for_training(model, config, steps_per_epoch=50, jit_compile=False)
    schedule = model.optimizer._learning_rate
    rates = [float(schedule(step)) for step in range(100)]
    assert int(np.argmax(rates)) == 9  # the tenth step (steps count from 1)
    np.testing.assert_allclose(max(rates), peak or 1e-3, rtol=1e-5)
    np.testing.assert_allclose(rates[4], (peak or 1e-3) * 5 / 10, rtol=1e-5)  # linear warm-up
    np.testing.assert_allclose(rates[39], (peak or 1e-3) * (10 / 40) ** 0.5, rtol=1e-5)  # then 1/sqrt(step)


@pytest.mark.parametrize("options", [dict(model="bahdanau"), dict(model="transformer", learning_rate=1e-3)])
def test_a_peak_rate_needs_the_transformer_schedule(options):
    with pytest.raises(ValueError, match="--peak-learning-rate is the Transformer's warm-up schedule"):
        TrainConfig.from_flat(peak_learning_rate=2e-3, **options)


def test_the_cosine_schedule_warms_up_then_reaches_zero_at_the_last_step():
    from keras_attention.models.transformer import Transformer
    from keras_attention.training.recipe import compile_for_training

    peak, warmup, total = 2e-3, 10, 2 * 50
    model = Transformer(30, 30, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32)
    config = TrainConfig.from_flat(model="transformer", epochs=2, warmup_steps=warmup, peak_learning_rate=peak,
                                   lr_schedule="cosine")
    compile_for_training(model, config, steps_per_epoch=50, jit_compile=False)
    schedule = model.optimizer._learning_rate
    rates = np.array([float(schedule(step)) for step in range(total + 1)])  # the optimizer's iterations 0...
    # As the inverse-sqrt schedule: linear warm-up, step i + 1 of it at peak * (i + 1) / warmup.
    np.testing.assert_allclose(rates[:warmup], peak * np.arange(1, warmup + 1) / warmup, rtol=1e-5)
    # From the peak on, peak * (1 + cos(pi * t)) / 2, t the fraction done of the steps from the peak to the end.
    t = np.arange(total - warmup + 2) / (total - warmup + 1)
    np.testing.assert_allclose(rates[warmup - 1:], peak * (1 + np.cos(np.pi * t)) / 2, rtol=1e-5, atol=peak * 1e-6)
    assert rates[total - 1] > 0 and rates[total] == 0  # the last update still moves; none would after it


@pytest.mark.parametrize("options", [dict(model="bahdanau"), dict(model="transformer", learning_rate=1e-3)])
def test_a_cosine_schedule_needs_the_transformer_schedule(options):
    with pytest.raises(ValueError, match="--lr-schedule is the Transformer's warm-up schedule.*--lr-schedule cosine"):
        TrainConfig.from_flat(lr_schedule="cosine", **options)
    with pytest.raises(ValueError, match="lr_schedule"):
        TrainConfig.from_flat(lr_schedule="linear")


@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_training_step_is_traced_once(jit_compile, monkeypatch):
    # Optimizer variables made during the first trace would make TensorFlow trace the step twice.
    from keras_attention.models.transformer import Transformer
    from keras_attention.training import corpus, distribution
    from keras_attention.training.recipe import build_and_compile

    traces = []
    train_step = Transformer.train_step
    monkeypatch.setattr(Transformer, "train_step", lambda self, data: traces.append(1) or train_step(self, data))
    config = TrainConfig.from_flat(
        model="transformer", preset="tiny", dataset="dates", vocab_size=240, max_length=40, epochs=1,
        batch_size=16, max_train_examples=64, jit_compile=jit_compile, length_buckets=1,
        overrides=dict(num_layers=1, d_model=16, num_heads=2, intermediate_dim=32),
    )
    strategy = distribution.get_strategy("default")
    prepared = corpus.training_data(config, strategy)
    assert prepared.xla == jit_compile
    model = build_and_compile(config, prepared, strategy)
    batch = next(iter(prepared.train))
    model.fit(tf.data.Dataset.from_tensors(batch).repeat(3), epochs=1, verbose=0, shuffle=False)
    assert len(traces) == 1  # one trace (the Python step runs once a trace)


def test_a_time_limit_ends_the_run_early_and_the_results_say_so(tmp_path, capsys):
    """Any epoch overruns a limit of a millionth of a minute: one epoch of three, a whole translator and results."""
    config = TrainConfig.from_flat(
        model="transformer", preset="tiny", dataset="dates", vocab_size=240, max_length=40, epochs=3,
        time_limit_minutes=1e-6, batch_size=16, max_train_examples=64, bleu_sample=0, jit_compile=False,
        keep_checkpoints=0, max_test_examples=8, output_dir=str(tmp_path / "run"),
        overrides=dict(num_layers=1, d_model=16, num_heads=2, intermediate_dim=32),
    )
    _, results = train(config, verbose=0)
    assert results["time_limit"] == {"minutes": 1e-6, "stopped_after_epoch": 1}
    assert len(results["history"]["loss"]) == 1 and results["steps"] == results["steps_per_epoch"]
    # verbose=0, as fit's: the time limit's notice is the only line (no strategy, data, vocabulary or XLA lines).
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert line.startswith("Time limit: stopping after epoch 1: "), line
    assert Translator.load(str(tmp_path / "run" / "translator"))(["1/3/2021"])  # the run's files are whole


def test_a_resumed_run_counts_the_training_time_of_its_earlier_epochs(tmp_path):
    from keras_attention.training.recipe import _earlier_training_seconds

    path = tmp_path / "history.csv"
    path.write_text("epoch,bleu_seconds,epoch_seconds,loss,validation_seconds\n"
                    "0,2.0,30.0,5.0,3.0\n1,NA,20.0,4.0,1.0\n2,2.0,50.0,3.0,3.0\n")
    # A backup of 25 steps of 10 an epoch: epochs 1 and 2 done (the third, logged, runs again).
    assert _earlier_training_seconds(str(path), 25, 10) == [25.0, 19.0]
    assert _earlier_training_seconds(str(path), 0, 10) == []  # a fresh run
    assert _earlier_training_seconds(str(path), 3, None) == [25.0, 19.0, 45.0]  # streamed: every logged epoch


def test_a_time_limit_is_refused_under_several_workers(tmp_path, monkeypatch):
    """Each worker would stop by its own clock, and a worker left training would wait for the others forever."""
    from keras_attention.training import recipe

    class _MultiWorker:  # what `train` reads to tell a multi-worker strategy
        cluster_resolver = object()

    monkeypatch.setattr(recipe, "get_strategy", lambda name: _MultiWorker())
    config = TrainConfig.from_flat(dataset="dates", time_limit_minutes=30, output_dir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"^--time-limit works in one process: .* Received: --time-limit 30 under "
                                         r"MultiWorkerMirroredStrategy$"):
        train(config, verbose=0)
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_cased_corpus_gives_cased_translations(tmp_path):
    """Case survives from the training text to the translations: every target word is capitalised, so a
    translator that lower-cased anywhere on the way (vocabulary, tokenizer, detokenizer) would write none."""
    words = {"dog": "Hund", "cat": "Katze", "house": "Haus", "tree": "Baum", "car": "Auto", "boat": "Boot"}
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(240):
        chosen = rng.choice(list(words), size=rng.integers(1, 4))
        lines.append(" ".join(chosen) + "\t" + " ".join(words[w] for w in chosen))
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = TrainConfig.from_flat(
        model="transformer", preset="tiny", dataset="tsv", vocab_size=60, max_length=12, epochs=4, learning_rate=5e-3,
        batch_size=16, bleu_sample=0, jit_compile=False, keep_checkpoints=0, max_test_examples=8,
        train_files=(str(tmp_path / "train.tsv"),), valid_files=(str(tmp_path / "valid.tsv"),),
        test_files=(str(tmp_path / "test.tsv"),), output_dir=str(tmp_path / "run"),
        overrides=dict(num_layers=1, d_model=32, num_heads=2, intermediate_dim=64),
    )
    train(config, verbose=0)
    outputs = Translator.load(str(tmp_path / "run" / "translator"))(["dog cat", "house", "tree car boat"])
    written = " ".join(outputs).split()
    assert written and set(written) <= set(words.values()), outputs
