"""Figures: attention maps, position encodings, learning-rate schedules, training curves.

Every function draws on a new matplotlib figure, saves it when `path` is given
(PNG, at `dpi`), and returns the figure. The non-interactive "Agg" backend is
used unless another one is already selected, so this works on servers.
"""

import matplotlib

if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
    matplotlib.use("Agg")

import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = [
    "plot_attention", "plot_attention_heads", "plot_history", "plot_position_encoding", "plot_schedule",
    "plot_transformer",
]


def _finish(fig, path, dpi):
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig


def _check_map(weights, source_tokens, target_tokens):
    weights = np.asarray(weights, dtype="float32")
    if weights.ndim != 2:
        raise ValueError(
            f"An attention map must be 2-D (target, source). Received: weights.shape={weights.shape}"
        )
    rows, cols = len(target_tokens), len(source_tokens)
    if rows > weights.shape[0] or cols > weights.shape[1]:
        raise ValueError(
            f"More tokens than attention rows/columns. Received: weights.shape={weights.shape}, "
            f"{rows} target tokens, {cols} source tokens"
        )
    return weights[:rows, :cols]


def _draw_map(ax, weights, source_tokens, target_tokens, title=None, labels=("source", "output")):
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, aspect="auto")
    ax.set_xticks(range(len(source_tokens)), labels=list(source_tokens), rotation=90)
    ax.set_yticks(range(len(target_tokens)), labels=list(target_tokens))
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    if title:
        ax.set_title(title)
    return image


def plot_attention(weights, source_tokens, target_tokens, path=None, title=None, dpi=100,
                   source_label="source", target_label="output"):
    """Heat map of one attention matrix with token labels.

    Args:
        weights: array `(T_out, T_src)` (extra rows/columns beyond the tokens
            are cut off, e.g. padding).
        source_tokens: list of str, the x tick labels.
        target_tokens: list of str, the y tick labels.
        path: str or None. Where to save a PNG.
        title: str or None.
        dpi: int. Defaults to 100.
        source_label: str. The x axis's name, for example the source language.
            Defaults to `"source"`.
        target_label: str. The y axis's name. Defaults to `"output"`.

    Returns:
        The matplotlib figure.

    Example:

    >>> weights = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> figure = plot_attention(weights, ["ein", "Hund"], ["a", "dog"], source_label="German", target_label="English")
    >>> figure.axes[0].get_xlabel(), figure.axes[0].get_ylabel()
    ('German', 'English')
    """
    weights = _check_map(weights, source_tokens, target_tokens)
    fig, ax = plt.subplots(
        figsize=(max(3.0, 0.4 * len(source_tokens) + 1.5), max(2.5, 0.4 * len(target_tokens) + 1.2))
    )
    image = _draw_map(ax, weights, source_tokens, target_tokens, title, (source_label, target_label))
    fig.colorbar(image, ax=ax)
    return _finish(fig, path, dpi)


def plot_attention_heads(weights, source_tokens, target_tokens, path=None, columns=4, dpi=100):
    """A grid of attention maps, one per head.

    Args:
        weights: array `(num_heads, T_out, T_src)`, for example one example's
            `return_attention_scores` of a `MultiHeadAttention`.
        source_tokens: list of str, the x tick labels of every map.
        target_tokens: list of str, the y tick labels of every map.
        path: str or None. Where to save a PNG.
        columns: int. Maps per row. Defaults to 4.
        dpi: int. Defaults to 100.

    Returns:
        The matplotlib figure.

    Example:

    >>> weights = np.full((4, 2, 3), 1 / 3)  # 4 heads, 2 output tokens, 3 source tokens
    >>> figure = plot_attention_heads(weights, ["a", "b", "c"], ["x", "y"], columns=2)
    >>> len(figure.axes)
    4
    """
    weights = np.asarray(weights, dtype="float32")
    if weights.ndim != 3:
        raise ValueError(
            f"Head maps must be 3-D (heads, target, source). Received: weights.shape={weights.shape}"
        )
    heads = weights.shape[0]
    columns = min(columns, heads)
    rows = -(-heads // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 3.0 * rows), squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h < heads:
            _draw_map(ax, _check_map(weights[h], source_tokens, target_tokens),
                      source_tokens, target_tokens, f"head {h}")
        else:
            ax.axis("off")
    return _finish(fig, path, dpi)


def plot_position_encoding(encoding, path=None, dpi=100):
    """Heat map of a position encoding, one row per position.

    Args:
        encoding: array `(positions, d_model)`, for example the output of
            `layers.SinusoidalPositionEncoding` without its batch axis.
        path: str or None. Where to save a PNG.
        dpi: int. Defaults to 100.

    Returns:
        The matplotlib figure.
    """
    encoding = np.asarray(encoding, dtype="float32")
    if encoding.ndim != 2:
        raise ValueError(f"Expected (positions, d_model). Received: encoding.shape={encoding.shape}")
    fig, ax = plt.subplots(figsize=(7, 4))
    image = ax.imshow(encoding, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xlabel("feature (sin at even, cos at odd)")
    ax.set_ylabel("position")
    fig.colorbar(image, ax=ax)
    return _finish(fig, path, dpi)


def plot_schedule(schedule, num_steps, path=None, dpi=100):
    """Learning rate against step for a Keras `LearningRateSchedule` (or any callable).

    Args:
        schedule: called with the step index (0-based), returns the rate.
            Called once with every step when it works element-wise (as
            `TransformerSchedule` and most Keras schedules do), else once a step.
        num_steps: int. Steps to draw.
        path: str or None. Where to save a PNG.
        dpi: int. Defaults to 100.

    Returns:
        The matplotlib figure.
    """
    steps = np.arange(num_steps)
    rates = _rates_at(schedule, steps)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps + 1, rates)
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    return _finish(fig, path, dpi)


def _rates_at(schedule, steps):
    """`schedule` at every step of `steps`: one call on all of them (40,000 eager calls take about 10 s),
    or, for a schedule that takes one step at a time (a condition on the step), a call a step."""
    try:
        rates = np.asarray(schedule(steps), dtype="float64")
    except Exception:  # whatever a one-step schedule raises on a vector: it is called a step at a time below
        rates = None
    if rates is None or rates.shape != steps.shape:
        rates = np.array([float(schedule(s)) for s in steps])
    return rates


def plot_history(history, metrics=("loss",), path=None, dpi=100):
    """Training curves from a `History` or its `.history` dict.

    Each metric is drawn with its `val_` counterpart when present.

    Args:
        history: a `keras.callbacks.History` (what `fit` returns), or a dict
            of lists of per-epoch values.
        metrics: names to draw, one panel each. Defaults to `("loss",)`.
        path: str or None. Where to save a PNG.
        dpi: int. Defaults to 100.

    Returns:
        The matplotlib figure.

    Raises:
        ValueError: a metric the history does not hold (the message lists
            the ones it does).
    """
    history = getattr(history, "history", history)
    missing = [m for m in metrics if m not in history]
    if missing:
        raise ValueError(f"Metrics not in the history: {missing}. Available: {sorted(history)}")
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        epochs = np.arange(1, len(history[metric]) + 1)
        ax.plot(epochs, history[metric], label=metric)
        if f"val_{metric}" in history:
            ax.plot(epochs, history[f"val_{metric}"], label=f"val_{metric}")
        ax.set_xlabel("epoch")
        ax.set_title(metric)
        ax.legend()
    return _finish(fig, path, dpi)


def plot_transformer(model, path=None, dpi=100):
    """The architecture of a `models.Transformer`, drawn from the model itself.

    Encoder on the left, decoder on the right, read bottom to top: the
    embeddings, one block of each stack with its sub-layers in the order the
    model runs them (post-norm: sub-layer, then add and norm; pre-norm: norm,
    sub-layer, add), the number of blocks, and the output layer. Sizes and
    options (heads, d_model, d_ff, positions, shared or tied embeddings)
    come from the model's attributes, so the figure is always the model's.

    Args:
        model: a `models.Transformer` (built or not).
        path: str or None. Where to save a PNG.
        dpi: int. Defaults to 100.

    Returns:
        The matplotlib figure.

    Example:

    >>> from keras_attention.models import Transformer
    >>> figure = plot_transformer(Transformer(100, 100, num_layers=2, d_model=32, num_heads=4, intermediate_dim=64))
    >>> any("2 ×" in t.get_text() for t in figure.axes[0].texts)
    True
    """
    missing = [name for name in ("encoder_blocks", "decoder_blocks", "d_model") if not hasattr(model, name)]
    if missing:
        raise ValueError(f"Expected a models.Transformer. Received: {type(model).__name__} without {missing}")
    block = model.encoder_blocks[0]
    heads, d_ff, pre = block.num_heads, block.intermediate_dim, block.normalize_first
    d, layers = model.d_model, len(model.encoder_blocks)

    def sublayers(names):
        steps = []
        for name in names:
            steps += ["layer norm", name, "add"] if pre else [name, "add & layer norm"]
        return steps

    feedforward = f"feed-forward, {d} → {d_ff} → {d}"
    encoder = sublayers([f"self-attention, {heads} heads", feedforward])
    decoder = sublayers([f"masked self-attention, {heads} heads", f"cross-attention, {heads} heads", feedforward])
    position = getattr(model, "position", "sinusoidal")
    fig, ax = plt.subplots(figsize=(9, 7.5))
    ax.set_xlim(0, 10)
    ax.axis("off")

    def box(x, y, text, color, width=3.6, height=None):
        height = height or (0.62 if "\n" in text else 0.42)
        ax.add_patch(matplotlib.patches.FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                                       boxstyle="round,pad=0.04", facecolor=color, edgecolor="0.3"))
        ax.text(x, y, text, ha="center", va="center", fontsize=8)

    def arrow(x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color="0.3"))

    def stack(x, inputs, embedding, steps, title):
        box(x, 0.5, inputs, "white")
        box(x, 1.4, embedding, "#e8f0fb")
        arrow(x, 0.72, x, 1.4 - (0.32 if "\n" in embedding else 0.22))
        top = 2.3 + 0.6 * len(steps)
        ax.add_patch(matplotlib.patches.Rectangle((x - 2.05, 2.0), 4.1, top - 2.0, fill=False, linestyle="--",
                                                  edgecolor="0.5"))
        ax.text(x - 2.0, top + 0.12, f"{title}: {layers} × this block", fontsize=9, weight="bold")
        y_prev = 1.4 + (0.32 if "\n" in embedding else 0.22)
        for i, step in enumerate(steps):
            y = 2.4 + 0.6 * i
            color = "#fdf0d5" if "attention" in step else "#e4f5e4" if "feed-forward" in step else "#f2f2f2"
            box(x, y, step, color)
            arrow(x, y_prev, x, y - 0.22)
            y_prev = y + 0.22
        return y_prev, top

    embedding = f"embedding ({d}) × √{d} + {position} positions"
    if getattr(model, "share_embeddings", False):
        embedding += "\n(one matrix for source, target and output)"
    source_top, encoder_top = stack(2.4, "source ids", embedding, encoder, "encoder")
    target_top, top = stack(7.6, "target ids, shifted right ([START] y)", embedding, decoder, "decoder")
    cross = 2.4 + 0.6 * decoder.index(f"cross-attention, {heads} heads")
    route = 5.0  # between the two stacks
    if pre:
        box(2.4, encoder_top + 0.6, "final layer norm", "#f2f2f2", width=2.2)
        arrow(2.4, source_top, 2.4, encoder_top + 0.38)
        source_top = encoder_top + 0.82
    ax.plot([2.4, 2.4, route, route], [source_top, source_top + 0.2, source_top + 0.2, cross], color="0.3", lw=1)
    arrow(route, cross, 5.8, cross)
    y = top + 0.6
    if pre:
        box(7.6, y, "final layer norm", "#f2f2f2", width=2.2)
        arrow(7.6, target_top, 7.6, y - 0.22)
        target_top, y = y + 0.22, y + 0.6
    output = "linear" + (" = the target embedding, transposed" if getattr(model, "tie_output", True) else "")
    box(7.6, y + 0.1, f"{output}\n→ softmax over the vocabulary", "#e8f0fb", height=0.62)
    arrow(7.6, target_top, 7.6, y - 0.22)
    ax.set_ylim(0, max(y + 0.7, source_top + 0.5))
    ax.set_title(f"Transformer: {layers} + {layers} blocks, d_model {d}, {heads} heads, d_ff {d_ff}, "
                 f"{'pre' if pre else 'post'}-norm", fontsize=10)
    return _finish(fig, path, dpi)
