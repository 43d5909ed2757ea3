import keras
import numpy as np
import pytest

from keras_attention.training import MaskedSparseCrossEntropy, MaskedTokenAccuracy, TransformerSchedule

rng = np.random.default_rng(0)


def _numpy_smoothed_loss(y_true, logits, eps, pad_id=0):
    """Cross-entropy against (1 - eps) * one_hot + eps / V, averaged over real tokens."""
    v = logits.shape[-1]
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    target = np.full(logits.shape, eps / v)
    target += (1 - eps) * np.eye(v)[y_true]
    per_token = -(target * log_probs).sum(-1)
    mask = y_true != pad_id
    return per_token[mask].sum() / mask.sum()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_matches_numpy(eps):
    y_true = rng.integers(1, 11, size=(4, 7))
    y_true[1, 3:] = 0
    y_true[3, 1:] = 0
    logits = rng.normal(size=(4, 7, 11)).astype("float32") * 3
    ours = float(MaskedSparseCrossEntropy(label_smoothing=eps)(y_true, logits))
    np.testing.assert_allclose(ours, _numpy_smoothed_loss(y_true, logits.astype("float64"), eps), rtol=1e-5)


def test_padding_contributes_nothing():
    y_true = rng.integers(1, 11, size=(3, 5))
    logits = rng.normal(size=(3, 5, 11)).astype("float32")
    loss = MaskedSparseCrossEntropy(label_smoothing=0.1)
    padded_true = np.pad(y_true, ((0, 0), (0, 4)))
    padded_logits = np.concatenate([logits, rng.normal(size=(3, 4, 11)).astype("float32") * 50], 1)
    np.testing.assert_allclose(float(loss(padded_true, padded_logits)), float(loss(y_true, logits)), rtol=1e-6)
    assert float(loss(np.zeros((2, 3), "int32"), logits[:2, :3])) == 0.0  # all padding: no NaN


def test_loss_config_and_bad_smoothing():
    loss = MaskedSparseCrossEntropy(label_smoothing=0.2, pad_id=5)
    clone = MaskedSparseCrossEntropy.from_config(loss.get_config())
    assert (clone.label_smoothing, clone.pad_id) == (0.2, 5)
    with pytest.raises(ValueError, match="label_smoothing=1.2"):
        MaskedSparseCrossEntropy(label_smoothing=1.2)


def test_masked_accuracy_counts_real_tokens_across_batches():
    metric = MaskedTokenAccuracy()
    y1 = np.array([[1, 2, 0, 0]])
    p1 = keras.ops.one_hot(np.array([[1, 3, 2, 2]]), 4)  # 1 of 2 right; padding ignored
    y2 = np.array([[3, 3, 3, 3]])
    p2 = keras.ops.one_hot(np.array([[3, 3, 3, 0]]), 4)  # 3 of 4 right
    metric.update_state(y1, p1)
    metric.update_state(y2, p2)
    assert float(metric.result()) == pytest.approx(4 / 6)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_schedule_is_the_papers_formula():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    for step in (1, 100, 3999, 4000, 4001, 50000):
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        np.testing.assert_allclose(float(schedule(step - 1)), expected, rtol=1e-5)
    peak = max(float(schedule(s)) for s in range(0, 8000, 50))
    np.testing.assert_allclose(peak, (512 * 4000) ** -0.5, rtol=1e-3)
    clone = TransformerSchedule.from_config(schedule.get_config())
    assert float(clone(123)) == float(schedule(123))
    with pytest.raises(ValueError, match="warmup_steps=0"):
        TransformerSchedule(512, warmup_steps=0)


def test_schedule_with_peak_reaches_that_peak_at_the_end_of_the_warm_up():
    schedule = TransformerSchedule.with_peak(256, warmup_steps=300, peak=3e-3)
    rates = [float(schedule(s)) for s in range(0, 1200)]
    assert int(np.argmax(rates)) == 299  # step 300, counted from 1
    np.testing.assert_allclose(rates[299], 3e-3, rtol=1e-5)
    np.testing.assert_allclose(rates[149], 3e-3 * 150 / 300, rtol=1e-5)  # linear warm-up
    np.testing.assert_allclose(rates[1199], 3e-3 * (1200 / 300) ** -0.5, rtol=1e-5)  # 1/sqrt decay
    with pytest.raises(ValueError, match="peak=0"):
        TransformerSchedule.with_peak(256, 300, peak=0)
