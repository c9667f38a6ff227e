"""One sandbox server and one browser for every end-to-end test in tests/sandbox.

Each episode still gets a fresh browser context (`env.reset`); only the
Chromium process and the Flask server are shared, so session ids must be
unique across files (`oracle_run.solve` derives them from the task id).
"""
from __future__ import annotations

import pytest

from sandbox.server import SandboxServer


@pytest.fixture(scope="package")
def server():
    with SandboxServer() as s:
        yield s


@pytest.fixture(scope="package")
def env():
    from crawlers.web_env import WebEnv  # only the browser tests pay for Playwright
    with WebEnv.launch(image_format="jpeg") as e:
        yield e
