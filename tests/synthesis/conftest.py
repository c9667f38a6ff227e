"""The real sandbox server and one Chromium (WebEnv) shared by the synthesis tests.

Package scope, not session: a sync Playwright left running would stop any later
test of the same worker from starting its own."""
from __future__ import annotations

import pytest

from crawlers.allowlist import Allowlist
from crawlers.web_env import WebEnv
from sandbox.server import SandboxServer


@pytest.fixture(scope="package")
def sandbox():
    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="package")
def env(sandbox):
    with WebEnv.launch(headless=True, step_timeout_s=10.0,
                       request_filter=Allowlist([sandbox.url])) as e:
        yield e
