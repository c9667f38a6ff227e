"""The real sandbox server and one headless Chromium (WebEnv) allowed to reach only it.

`sandbox, env = sandbox_fixtures("module")` in a conftest or test module. Module or
package scope, never session: a sync Playwright left running would stop a later test
of the same xdist worker from starting its own.
"""

from __future__ import annotations

import pytest

from crawlers.allowlist import Allowlist
from crawlers.web_env import WebEnv
from sandbox.server import SandboxServer


def sandbox_fixtures(scope: str, step_timeout_s: float = 10.0):
    if scope == "session":
        raise ValueError("a session-long sync Playwright breaks later tests of the worker")

    @pytest.fixture(scope=scope)
    def sandbox():
        with SandboxServer() as server:
            yield server

    @pytest.fixture(scope=scope)
    def env(sandbox):
        with WebEnv.launch(
            headless=True, step_timeout_s=step_timeout_s, request_filter=Allowlist([sandbox.url])
        ) as e:
            yield e

    return sandbox, env
