import numpy as np
import pytest
from PIL import Image

from keras_attention.explain import plotting
from keras_attention.training import TransformerSchedule

rng = np.random.default_rng(0)


def _png_size(path):
    with Image.open(path) as image:
        return image.size


def test_attention_map_png_and_tick_labels(tmp_path):
    source, target = ["[START]", "a", "dog", "##.", "[END]"], ["ein", "hund", "##."]
    weights = rng.random((5, 7))  # extra rows/columns (padding) are cut off
    path = tmp_path / "map.png"
    fig = plotting.plot_attention(weights, source, target, path=str(path), dpi=50)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == source
    assert [t.get_text() for t in ax.get_yticklabels()] == target
    width, height = fig.get_size_inches() * 50
    assert _png_size(path) == (round(width), round(height))
    assert path.stat().st_size > 1000


def test_head_grid(tmp_path):
    path = tmp_path / "heads.png"
    fig = plotting.plot_attention_heads(rng.random((6, 3, 4)), list("abcd"), list("xyz"), path=str(path), columns=4)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 6
    assert [t.get_text() for t in drawn[5].get_xticklabels()] == list("abcd")
    assert _png_size(path)[0] > _png_size(path)[1]


def test_position_schedule_and_history_plots(tmp_path):
    for name, fig in {
        "pe": plotting.plot_position_encoding(rng.uniform(-1, 1, (20, 16)), path=str(tmp_path / "pe.png")),
        "lr": plotting.plot_schedule(TransformerSchedule(64, 50), 200, path=str(tmp_path / "lr.png")),
        "hist": plotting.plot_history({"loss": [3, 2, 1], "val_loss": [3.5, 2.5, 2]}, path=str(tmp_path / "hist.png")),
    }.items():
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    line = fig.axes[0].lines[1]
    assert list(line.get_ydata()) == [3.5, 2.5, 2]


def test_a_schedule_is_drawn_at_every_step_whether_it_takes_one_step_or_all():
    import keras

    element_wise = TransformerSchedule(64, 50)  # called once, on every step
    one_at_a_time = keras.optimizers.schedules.CosineDecay(1e-4, 150, warmup_target=1e-3, warmup_steps=50)
    for schedule in (element_wise, one_at_a_time):
        line = plotting.plot_schedule(schedule, 200).axes[0].lines[0]
        np.testing.assert_allclose(line.get_ydata(), [float(schedule(step)) for step in range(200)], rtol=1e-6)
        assert list(line.get_xdata()) == list(range(1, 201))


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"weights.shape=\(3,\)"):
        plotting.plot_attention(np.ones(3), ["a"], ["b"])
    with pytest.raises(ValueError, match="3 target tokens"):
        plotting.plot_attention(np.ones((2, 2)), ["a", "b"], ["x", "y", "z"])
    with pytest.raises(ValueError, match="bleu"):
        plotting.plot_history({"loss": [1.0]}, metrics=("bleu",))


@pytest.mark.parametrize("normalize_first", [False, True])
def test_transformer_figure_is_drawn_from_the_model(tmp_path, normalize_first):
    from keras_attention.models import Transformer

    model = Transformer(50, 50, num_layers=3, d_model=24, num_heads=3, intermediate_dim=40,
                        normalize_first=normalize_first)
    fig = plotting.plot_transformer(model, path=str(tmp_path / "model.png"))
    texts = [t.get_text() for t in fig.axes[0].texts if t.get_text()]  # (arrows are empty texts)
    assert "encoder: 3 × this block" in texts and "decoder: 3 × this block" in texts
    assert texts.count("feed-forward, 24 → 40 → 24") == 2 and "cross-attention, 3 heads" in texts
    # The decoder's sub-layers in the order the block runs them.
    decoder = texts[texts.index("masked self-attention, 3 heads") - (1 if normalize_first else 0):]
    expected = (["layer norm", "masked self-attention, 3 heads", "add", "layer norm", "cross-attention, 3 heads", "add"]
                if normalize_first else
                ["masked self-attention, 3 heads", "add & layer norm", "cross-attention, 3 heads", "add & layer norm"])
    assert decoder[:len(expected)] == expected
    assert texts.count("final layer norm") == (2 if normalize_first else 0)
    assert (tmp_path / "model.png").stat().st_size > 1000


def test_transformer_figure_needs_a_transformer():
    with pytest.raises(ValueError, match="Expected a models.Transformer. Received: dict"):
        plotting.plot_transformer({})
