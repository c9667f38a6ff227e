"""One sandbox server and one browser for every end-to-end test in tests/sandbox.

Each episode still gets a fresh browser context (`env.reset`); only the
Chromium process and the Flask server are shared, so session ids must be
unique across files (`oracle_run.solve` derives them from the task id).
"""

from __future__ import annotations

import pytest

from sandbox.server import SandboxServer, create_app


@pytest.fixture(scope="package")
def server():
    with SandboxServer() as s:
        yield s


@pytest.fixture(scope="package")
def _browser():
    from crawlers.web_env import WebEnv  # only the browser tests pay for Playwright

    with WebEnv.launch(image_format="jpeg") as e:
        yield e


@pytest.fixture()
def env(_browser):
    """The shared WebEnv; relaunched if an earlier test killed it, so one crash fails one test."""
    if not _browser.is_alive():
        _browser.restart()
    return _browser


@pytest.fixture()
def open_session():
    """`open_session(app, lang, seed=0, sid="t1") -> (Flask test client, Session)`.

    Sessions opened by one test share a fresh Flask app (no server, no browser).
    """
    flask_app = create_app()

    def open_(app: str, lang: str, seed: int = 0, sid: str = "t1"):
        client = flask_app.test_client()
        r = client.get(f"/start?sid={sid}&app={app}&lang={lang}&seed={seed}")
        assert r.status_code == 302 and r.headers["Location"] == f"/{app}/"
        return client, flask_app.config["SESSIONS"].get(sid)

    return open_
