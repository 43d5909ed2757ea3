"""See what a translator attends to: every attention weight, on one HTML page.

>>> page = explain(translator, ["A dog runs on the beach."])  # doctest: +SKIP
>>> page.save("attention.html")  # doctest: +SKIP
>>> page  # in Jupyter: the interactive page  # doctest: +SKIP
"""

import warnings

from keras_attention.base.files import check_output_file, write_text
from keras_attention.base.validation import TruncationWarning
from keras_attention.explain.page import render_fragment, render_page, strongest_alignments
from keras_attention.explain.weights import SentenceAttention, collect_attention

__all__ = ["Explanation", "SentenceAttention", "collect_attention", "explain"]


class Explanation:
    """The attention of a translator on some sentences, shown as a page.

    Attributes:
        sentences: list of `SentenceAttention` (the NumPy arrays and tokens).

    `save(path)` writes a self-contained HTML file; in Jupyter the object
    displays itself as the same interactive page (a viewer that runs no
    script shows a table of the strongest alignments), and as text those
    alignments.
    """

    def __init__(self, sentences, title="Attention explorer"):
        self.sentences = list(sentences)
        self.title = title

    def to_html(self):
        """The whole page, as a str."""
        return render_page(self.sentences, self.title)

    def _repr_html_(self):
        return render_fragment(self.sentences, self.title)

    def __repr__(self):
        lines = [f"{self.title}: the source piece each output piece attends to most"]
        for s in self.sentences:
            lines.append(f"{s.source} -> {s.translation}")
            lines.append("  " + ", ".join(f"{out} <- {src} ({weight:.2f})"
                                          for out, src, weight in strongest_alignments(s)))
        return "\n".join(lines)

    def save(self, path):
        """Write the page to `path` (its folder must exist); return the path."""
        check_output_file(path)
        write_text(path, self.to_html())
        return path


def explain(translator, sentences, options=None, title="Attention explorer", **settings):
    """Translate `sentences` and collect every attention weight, for a page.

    Args:
        translator: a `Translator` of a Transformer or an attention RNN.
        sentences: a str or a list of str, none empty.
        options: a `decoding.DecodingOptions` of method `"greedy"` or
            `"beam"`, or a method name. Defaults to None (greedy).
        title: the page's title.
        **settings: fields of `DecodingOptions` that replace those of `options`.

    Returns:
        An `Explanation`. A source longer than the model's maximum is
        truncated, with a warning and a note on the page.
    """
    found = collect_attention(translator, sentences, options, **settings)
    cut = sum(s.truncated for s in found)
    if cut:
        warnings.warn(TruncationWarning(cut, len(found), translator.max_source_length), stacklevel=2)
    return Explanation(found, title)
