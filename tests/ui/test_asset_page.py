"""The Dagster UI shows a synced asset's metadata and check results after ``make demo``.

``make dev``'s server (on UI_TEST_PORT) is opened by headless Chromium from Debian's packages,
driven by Selenium through Debian's chromedriver; nothing is downloaded. Screenshots land in
``.pms-sync/ui-test/`` for a person to look at.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
PORT = int(os.environ.get("UI_TEST_PORT", "3119"))
BASE = f"http://127.0.0.1:{PORT}"
SHOTS = ROOT / ".pms-sync" / "ui-test"
ASSET = "hotel/synced_reservations"


def _answers() -> bool:
    try:
        with urllib.request.urlopen(f"{BASE}/server_info", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def dagster_ui() -> Iterator[str]:
    """``make dev``'s server on the demo's instance, stopped with SIGINT as Ctrl-C would."""
    server = subprocess.Popen(
        [sys.executable, "-m", "assets.dev", "--port", str(PORT)],
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _answers():
            assert server.poll() is None, "make dev ended before the UI answered"
            assert time.monotonic() < deadline, "the UI did not answer within 2 minutes"
            time.sleep(1)
        yield BASE
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=60)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
        "--window-size=1600,1200",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


def page_text(browser: webdriver.Chrome, url: str, expected: list[str], shot: str) -> str:
    """The page's text once every expected text is shown (or the text when the wait ends)."""
    browser.get(url)

    def shown(driver: webdriver.Chrome) -> bool:
        # The UI's first visit asks to join its community in a dialog over the page.
        for skip in driver.find_elements("xpath", "//button[normalize-space()='Skip']"):
            skip.click()
        body = driver.find_element("tag name", "body").text
        return "Join the Dagster community" not in body and all(text in body for text in expected)

    try:
        WebDriverWait(browser, 60).until(shown)
    finally:
        SHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SHOTS / shot))
    return browser.find_element("tag name", "body").text


def test_the_asset_page_of_a_synced_asset_shows_its_metadata_and_check_results(
    dagster_ui: str, browser: webdriver.Chrome
) -> None:
    events = page_text(
        browser,
        f"{dagster_ui}/assets/{ASSET}?view=events",
        ["acknowledged", "run_requests"],
        "synced_reservations-events.png",
    )
    checks = page_text(
        browser,
        f"{dagster_ui}/assets/{ASSET}?view=checks",
        ["count_anomalies", "upcoming_arrivals_sent"],
        "synced_reservations-checks.png",
    )

    for label in ("acknowledged", "create", "run_requests", "window", "accounts"):
        assert label in events
    for check in (
        "count_anomalies",
        "no_new_dead_letters",
        "accounts_authenticated",
        "service_answers_agree",
        "upcoming_arrivals_sent",
    ):
        assert check in checks
    assert "Passed" in checks or "Succeeded" in checks
