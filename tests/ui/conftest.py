"""The browser smoke test runs only under ``make ui-test`` (after ``make demo``), never in
``make test``: it needs Debian's Chromium and the demo's Dagster instance."""

import os

collect_ignore = [] if os.environ.get("UI_TEST_PORT") else ["test_asset_page.py"]
