"""One self-contained HTML page of attention weights: data, script and style inline.

The page works from disk (`file://`) with no network access. It shows, for a
chosen sentence, kind of attention, layer and head (or the mean of the
heads): a heatmap of the weights (exact value on hover, in each cell's
`title` and `data-value`) and a "head view" with the query tokens on the
left, the key tokens on the right and a line for each pair, drawn as strong
as its weight. Hovering, focusing or clicking a query token keeps its lines
only and shades the key tokens by weight; the largest is outlined. Colours
follow viridis (sequential, readable with colour-blindness). A viewer that
runs no script (a notebook viewer that strips them) shows a static table of
the strongest alignments instead.
"""

import html
import json
import uuid

import numpy as np

KIND_LABELS = {
    "cross": "cross-attention (target → source)",
    "encoder": "encoder self-attention (source → source)",
    "decoder": "decoder self-attention (target → target, causal)",
}

STYLE = """
.ka-explain { font-family: system-ui, sans-serif; font-size: 14px; color: #111; }
.ka-explain .controls { display: flex; flex-wrap: wrap; gap: 12px; align-items: center; margin: 8px 0; }
.ka-explain fieldset { border: 1px solid #bbb; padding: 2px 8px; }
.ka-explain .note { background: #fff3cd; border: 1px solid #e0c36a; padding: 4px 8px; margin: 6px 0; }
.ka-explain .views { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.ka-explain table.heatmap { border-collapse: collapse; }
.ka-explain table.heatmap td.cell { width: 14px; height: 14px; padding: 0; border: 1px solid #fff; }
.ka-explain table.heatmap td.cell:hover { outline: 2px solid #e6550d; }
.ka-explain table.heatmap th { font-weight: normal; font-size: 12px; padding: 0 4px; white-space: nowrap; }
.ka-explain table.heatmap th.key { writing-mode: vertical-rl; transform: rotate(180deg); text-align: left;
                                   padding: 4px 0; }
.ka-explain .word { border-top: 1px solid #999; }
.ka-explain th.key.word { border-top: none; border-right: 1px solid #999; }
.ka-explain .cont { color: #666; }
.ka-explain .headview { position: relative; display: flex; gap: 0; }
.ka-explain .column { display: flex; flex-direction: column; }
.ka-explain .token { font-size: 13px; line-height: 20px; height: 20px; padding: 0 6px; border-radius: 3px;
  cursor: pointer; white-space: nowrap; background: transparent; border: none; text-align: left; font-family: inherit; }
.ka-explain .column.keys .token { text-align: left; }
.ka-explain .column.queries .token { text-align: right; }
.ka-explain .token.active { background: #fdd0a2; }
.ka-explain .token.strongest { outline: 2px solid #e6550d; }
.ka-explain .status { min-height: 20px; font-family: ui-monospace, monospace; margin: 4px 0; }
.ka-explain table.strongest td, .ka-explain table.strongest th { padding: 0 8px; text-align: left; }
"""

SCRIPT = r"""
(function () {
  const root = document.getElementById("__ROOT__");
  root.querySelector(".interactive").hidden = false;  // scripts run: the explorer replaces the static table
  root.querySelector(".static").hidden = true;
  const data = JSON.parse(root.querySelector("script.ka-data").textContent);
  const VIRIDIS = [[68,1,84],[72,40,120],[62,74,137],[49,104,142],[38,130,142],
                   [31,158,137],[53,183,121],[109,205,89],[180,222,44],[253,231,37]];
  const $ = (name) => root.querySelector("." + name);
  const state = {sentence: 0, kind: data.kinds[0], layer: data.layers - 1, head: "mean", query: null};

  function colour(value) {
    const x = Math.max(0, Math.min(1, value)) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
    const c = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * f));
    return "rgb(" + c.join(",") + ")";
  }
  function isContinuation(token) { return token.startsWith("##"); }
  function tokens(which) {
    const s = data.sentences[state.sentence];
    if (state.kind === "encoder") return s.source_tokens;
    if (state.kind === "decoder") return s.decoder_input_tokens;
    return which === "query" ? s.target_tokens : s.source_tokens;
  }
  // The map shown: one head, or the mean of the heads, of the chosen layer.
  function matrix() {
    const heads = data.sentences[state.sentence].weights[state.kind][state.layer];
    if (state.head !== "mean") return heads[state.head];
    return heads[0].map((row, i) => row.map((_, j) => heads.reduce((sum, h) => sum + h[i][j], 0) / heads.length));
  }
  function element(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function describe(i, j, value) {
    return tokens("query")[i] + " → " + tokens("key")[j] + ": " + value.toFixed(5);
  }

  function drawHeatmap(m) {
    const table = $("heatmap");
    table.replaceChildren();
    const largest = Math.max(1e-12, ...m.map((row) => Math.max(...row)));
    const header = element("tr");
    header.appendChild(element("th"));
    tokens("key").forEach((t) => header.appendChild(
      element("th", "key " + (isContinuation(t) ? "cont" : "word"), t)));
    table.appendChild(header);
    m.forEach((row, i) => {
      const tr = element("tr");
      const q = tokens("query")[i];
      tr.appendChild(element("th", "query " + (isContinuation(q) ? "cont" : "word"), q));
      row.forEach((value, j) => {
        const td = element("td", "cell");
        td.style.background = colour(value / largest);
        td.dataset.row = i; td.dataset.col = j; td.dataset.value = value;
        td.title = describe(i, j, value);
        td.addEventListener("mouseenter", () => { $("status").textContent = describe(i, j, value); });
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
  }

  function drawHeadView(m) {
    const view = $("headview");
    view.replaceChildren();
    const queries = element("div", "column queries"), keys = element("div", "column keys");
    const width = 160, rowHeight = 20, rows = Math.max(m.length, m[0].length);
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("width", width); svg.setAttribute("height", rows * rowHeight);
    const lines = [];
    m.forEach((row, i) => row.forEach((value, j) => {
      if (value < 0.01) return;
      const line = document.createElementNS(svgNS, "line");
      line.setAttribute("x1", 0); line.setAttribute("y1", i * rowHeight + rowHeight / 2);
      line.setAttribute("x2", width); line.setAttribute("y2", j * rowHeight + rowHeight / 2);
      line.setAttribute("stroke", "#3b528b"); line.setAttribute("stroke-width", 2);
      line.setAttribute("stroke-opacity", value);
      line.dataset.row = i;
      svg.appendChild(line); lines.push(line);
    }));
    const keyButtons = tokens("key").map((t, j) => {
      const b = element("button", "token key " + (isContinuation(t) ? "cont" : "word"), t);
      b.type = "button"; b.dataset.index = j; keys.appendChild(b); return b;
    });
    function select(i) {
      state.query = i;
      lines.forEach((l) => l.setAttribute("visibility", i === null || +l.dataset.row === i ? "visible" : "hidden"));
      queries.querySelectorAll(".token").forEach((b, k) => b.classList.toggle("active", k === i));
      const strongest = i === null ? -1 : m[i].indexOf(Math.max(...m[i]));
      keyButtons.forEach((b, j) => {
        const w = i === null ? 0 : m[i][j];
        b.dataset.weight = w;
        b.style.background = i === null ? "transparent" : "rgba(230, 85, 13, " + w + ")";
        b.classList.toggle("strongest", j === strongest);
      });
      if (i !== null) $("status").textContent = tokens("query")[i] + " attends most to " +
        tokens("key")[strongest] + " (" + m[i][strongest].toFixed(5) + ")";
    }
    tokens("query").forEach((t, i) => {
      const b = element("button", "token query " + (isContinuation(t) ? "cont" : "word"), t);
      b.type = "button"; b.dataset.index = i;
      b.addEventListener("mouseenter", () => select(i));
      b.addEventListener("focus", () => select(i));
      b.addEventListener("click", () => select(i));
      queries.appendChild(b);
    });
    view.append(queries, svg, keys);
    view.addEventListener("mouseleave", () => { if (document.activeElement.parentNode !== queries) select(null); });
    select(state.query !== null && state.query < m.length ? state.query : null);
  }

  function draw() {
    const s = data.sentences[state.sentence];
    $("source").textContent = s.source;
    $("translation").textContent = s.translation;
    $("note").hidden = !s.truncated;
    const m = matrix();
    drawHeatmap(m);
    drawHeadView(m);
  }

  function fillSelect(name, options) {
    const select = $(name);
    options.forEach(([value, label]) => {
      const o = element("option", "", label); o.value = value; select.appendChild(o);
    });
    select.addEventListener("change", () => {
      state[name] = name === "head" && select.value === "mean" ? "mean" : +select.value;
      state.query = null;
      draw();
    });
    return select;
  }
  fillSelect("sentence", data.sentences.map((s, i) => [i, (i + 1) + ": " + s.source.slice(0, 60)]));
  fillSelect("layer", [...Array(data.layers).keys()].map((l) => [l, "layer " + (l + 1)])).value = state.layer;
  fillSelect("head", [["mean", "mean of heads"], ...[...Array(data.heads).keys()].map((h) => [h, "head " + (h + 1)])]);
  root.querySelectorAll("input.kind").forEach((input) => {
    input.checked = input.value === state.kind;
    input.addEventListener("change", () => { state.kind = input.value; state.query = null; draw(); });
  });
  draw();
  root.dataset.ready = "true";
})();
"""


def _rounded(array):
    """Nested lists with 5 decimals: the page's data (exact to 5e-6)."""
    return np.round(np.asarray(array, "float64"), 5).tolist()


def page_data(found):
    """The JSON the page reads, from a list of `SentenceAttention`."""
    kinds = [k for k in ("cross", "encoder", "decoder") if k in found[0].weights]
    return {
        "kinds": kinds,
        "layers": found[0].num_layers,
        "heads": found[0].num_heads,
        "sentences": [
            {
                "source": s.source,
                "translation": s.translation,
                "source_tokens": s.source_tokens,
                "target_tokens": s.target_tokens,
                "decoder_input_tokens": s.decoder_input_tokens,
                "truncated": s.truncated,
                "weights": {k: _rounded(s.weights[k]) for k in kinds},
            }
            for s in found
        ],
    }


def strongest_alignments(sentence):
    """`[(output piece, source piece, weight)]`: the source piece each output piece attends to most, in the
    cross-attention of the last layer, mean of the heads (an RNN's alignment)."""
    weights = np.asarray(sentence.weights["cross"][-1], "float64").mean(axis=0)  # (T, S)
    best = weights.argmax(axis=-1)
    return [(token, sentence.source_tokens[j], float(row[j]))
            for token, row, j in zip(sentence.target_tokens, weights, best)]


def render_static(found):
    """What a viewer without scripts shows: each sentence, its translation and `strongest_alignments`."""
    parts = ['<div class="static"><p>The source piece each output piece attends to most (last layer, mean of '
             "the heads). The interactive explorer needs a viewer that runs scripts.</p>"]
    for s in found:
        rows = "".join(f"<tr><td>{html.escape(out)}</td><td>{html.escape(src)}</td><td>{weight:.2f}</td></tr>"
                       for out, src, weight in strongest_alignments(s))
        parts.append(f"<p><b>Source:</b> {html.escape(s.source)}<br><b>Translation:</b> "
                     f"{html.escape(s.translation)}</p>\n<table class=\"strongest\"><tr><th>output piece</th>"
                     f"<th>attends most to</th><th>weight</th></tr>{rows}</table>")
    return "\n".join(parts) + "</div>"


def render_fragment(found, title="Attention explorer"):
    """An HTML fragment (for Jupyter): the page's body, its style and script scoped to one `div`."""
    root = f"ka-explain-{uuid.uuid4().hex[:10]}"
    data = page_data(found)
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    kinds = data["kinds"]
    radios = "".join(
        f'<label><input type="radio" class="kind" name="{root}-kind" value="{k}"> '
        f'{html.escape(KIND_LABELS[k])}</label> '
        for k in kinds
    )
    many = "" if len(found) > 1 else " hidden"
    return f"""<div class="ka-explain" id="{root}">
<style>{STYLE}</style>
<h2>{html.escape(title)}</h2>
{render_static(found)}
<div class="interactive" hidden>
<p><b>Source:</b> <span class="source"></span><br><b>Translation:</b> <span class="translation"></span></p>
<p class="note" hidden>This sentence was longer than the model's maximum and was truncated: only its first
pieces were translated and are shown.</p>
<div class="controls">
<label{many}>Sentence <select class="sentence"></select></label>
<fieldset><legend>Attention</legend>{radios}</fieldset>
<label>Layer <select class="layer"></select></label>
<label>Head <select class="head"></select></label>
</div>
<div class="status" aria-live="polite"></div>
<div class="views">
<div><h3>Weights</h3><p>Rows: queries; columns: keys. Colour: weight / the largest in the map.</p>
<table class="heatmap"></table></div>
<div><h3>Head view</h3><p>Hover or focus a query token on the left.</p><div class="headview"></div></div>
</div>
</div>
<script type="application/json" class="ka-data">{payload}</script>
<script>{SCRIPT.replace("__ROOT__", root)}</script>
</div>"""


def render_page(found, title="Attention explorer"):
    """A whole HTML document that opens from disk in any browser."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>
<body>
{render_fragment(found, title)}
</body></html>
"""
