"""The explorer page in a real browser: it loads offline, shows the chosen weights, highlights on hover."""

import json
import pathlib

import numpy as np
import pytest

from keras_attention.explain import explain
from tests.explain.browser import chromium
from tests.explain.explain_helpers import SENTENCES, dates_tokenizers, make_translator

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("browser-tmp"))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def tokenizers():
    return dates_tokenizers()


def _open(browser, page, folder, name):
    from selenium.webdriver.support.ui import WebDriverWait

    path = pathlib.Path(page.save(str(folder / f"{name}.html")))
    browser.get_log("browser"), browser.get_log("performance")  # start from empty logs
    browser.get(path.as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.execute_script("return document.querySelector('.ka-explain').dataset.ready") == "true")
    # The script replaced the static fallback with the explorer.
    assert browser.execute_script(
        "return ['.static', '.interactive'].map(s => document.querySelector('.ka-explain ' + s).hidden)") == [
        True, False]
    return path


def _choose(browser, name, value):
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("css selector", f".ka-explain select.{name}")).select_by_value(str(value))


def _shown(browser):
    """The heatmap read back from the DOM: a (rows, cols) array of each cell's data-value."""
    cells = browser.execute_script(
        "return [...document.querySelectorAll('td.cell')].map(c => [+c.dataset.row, +c.dataset.col, +c.dataset.value])")
    rows, cols = max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1
    shown = np.zeros((rows, cols))
    for i, j, value in cells:
        shown[i, j] = value
    return shown


def _screenshot(browser, folder, name):
    path = folder / f"{name}.png"
    browser.save_screenshot(str(path))
    assert path.stat().st_size > 20_000  # a rendered page, not a blank one
    return path


def test_transformer_page_offline_layers_heads_and_hover(browser, tokenizers, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains

    translator = make_translator(tokenizers, "transformer", num_layers=2, num_heads=4)
    page = explain(translator, SENTENCES)
    _open(browser, page, tmp_path, "transformer")

    # No console errors, and no request but the file itself.
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    requests = [json.loads(e["message"])["message"] for e in browser.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"]
    assert urls and all(url.startswith("file://") for url in urls), urls

    # Layer 2, head 3, cross-attention of the second sentence: the weights Python computed.
    expected = page.sentences[1].weights
    _choose(browser, "sentence", 1)
    browser.find_element("css selector", "input.kind[value='cross']").click()
    _choose(browser, "layer", 1)
    _choose(browser, "head", 2)
    np.testing.assert_allclose(_shown(browser), expected["cross"][1, 2], atol=1e-4)
    # Encoder self-attention, layer 1, the mean of the heads.
    browser.find_element("css selector", "input.kind[value='encoder']").click()
    _choose(browser, "layer", 0)
    _choose(browser, "head", "mean")
    np.testing.assert_allclose(_shown(browser), expected["encoder"][0].mean(0), atol=1e-4)
    # Decoder self-attention of head 1: causal, as computed.
    browser.find_element("css selector", "input.kind[value='decoder']").click()
    _choose(browser, "head", 0)
    np.testing.assert_allclose(_shown(browser), expected["decoder"][0, 0], atol=1e-4)

    # Hovering a target token highlights the source tokens it attends to most.
    browser.find_element("css selector", "input.kind[value='cross']").click()
    _choose(browser, "layer", 1)
    _choose(browser, "head", 3)
    weights = expected["cross"][1, 3]
    queries = browser.find_elements("css selector", ".headview .token.query")
    assert [q.text for q in queries] == page.sentences[1].target_tokens
    for i in range(len(queries)):
        ActionChains(browser).move_to_element(queries[i]).perform()
        keys = browser.find_elements("css selector", ".headview .token.key")
        strongest = [j for j, k in enumerate(keys) if "strongest" in k.get_attribute("class")]
        assert strongest == [int(np.argmax(weights[i]))]
        shading = [float(k.get_attribute("data-weight")) for k in keys]
        np.testing.assert_allclose(shading, weights[i], atol=1e-4)
    _screenshot(browser, tmp_path, "transformer")


@pytest.mark.parametrize("kind", ["bahdanau"])
def test_rnn_page_shows_the_alignment(browser, tokenizers, tmp_path, kind):
    translator = make_translator(tokenizers, kind)
    page = explain(translator, SENTENCES[1])
    _open(browser, page, tmp_path, kind)
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    kinds = browser.execute_script("return [...document.querySelectorAll('input.kind')].map(i => i.value)")
    assert kinds == ["cross"]
    np.testing.assert_allclose(_shown(browser), page.sentences[0].weights["cross"][0, 0], atol=1e-4)
    source = browser.find_elements("css selector", "table.heatmap th.key")
    assert [s.text for s in source] == page.sentences[0].source_tokens
    _screenshot(browser, tmp_path, kind)
