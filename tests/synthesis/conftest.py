"""The real sandbox server and one Chromium (WebEnv) shared by the synthesis tests."""
from __future__ import annotations

import pytest

from crawlers.allowlist import Allowlist
from crawlers.web_env import WebEnv
from sandbox.server import SandboxServer


@pytest.fixture(scope="session")
def sandbox():
    with SandboxServer() as server:
        yield server


@pytest.fixture(scope="session")
def env(sandbox):
    with WebEnv.launch(headless=True, step_timeout_s=10.0,
                       request_filter=Allowlist([sandbox.url])) as e:
        yield e
