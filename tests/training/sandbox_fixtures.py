"""The real sandbox server and one headless Chromium for the online training tests.

Module scope (never session): a sync Playwright left running would stop a later
test of the same worker from starting its own. Import the fixtures into a test
module: `from .sandbox_fixtures import sandbox, env  # noqa: F401`.
"""
from __future__ import annotations

import pytest

from crawlers.allowlist import Allowlist
from crawlers.web_env import WebEnv
from sandbox.server import SandboxServer


@pytest.fixture(scope="module")
def sandbox():
    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="module")
def env(sandbox):
    with WebEnv.launch(headless=True, step_timeout_s=10.0,
                       request_filter=Allowlist([sandbox.url])) as e:
        yield e
