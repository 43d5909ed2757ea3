"""A headless chromium driven by selenium, for the pages the library writes.

Needs Debian's `chromium` and `chromium-driver` (`apt-get install chromium
chromium-driver`; `.ci/run` installs them). Without them the browser tests
skip locally, but fail under CI (`CI=true`), which must run them.
"""

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def chromium(tmp_dir):
    """A headless chromium WebDriver that logs the console and the network.

    The browser's temporary files (its profile, its singleton socket folder, which it leaves behind) go in
    `tmp_dir`, not in the machine's temporary folder."""
    if not (CHROMIUM and DRIVER):
        message = "no chromium/chromedriver: apt-get install chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run the browser tests)")
        pytest.skip(message)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[dev]'")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # given, so selenium never looks for (or downloads) a browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=DRIVER, env={**os.environ, "TMPDIR": str(tmp_dir)})
    return webdriver.Chrome(service=service, options=options)
