"""The sandbox web server: every app, in English and Chinese, on 127.0.0.1.

    GET  /start?sid=&app=&lang=&seed=&theme=&font_scale=&distraction_rate=
         creates the session (its state from the app's seeded data), sets the
         session cookie and redirects to the app's home page.
    GET  /api/state/<sid>   the session's state as JSON (for verifiers)
    GET  /healthz           "ok"

Each app is a Flask blueprint mounted at /<app>/ (see apps/). Pages are
rendered on the server from the session's state; forms post back and redirect.
"""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlencode

from flask import Flask, abort, g, jsonify, make_response, redirect, render_template, request
from werkzeug.serving import make_server

from .distractions import pick_distraction
from .sessions import Session, SessionRegistry

COOKIE = "tf_sid"


def create_app() -> Flask:
    from .apps import APPS

    app = Flask(__name__, template_folder="templates", static_folder="static")
    app.config["SESSIONS"] = SessionRegistry()

    @app.get("/healthz")
    def healthz():
        return "ok"

    @app.get("/start")
    def start():
        args = request.args
        name = args.get("app", "")
        if name not in APPS:
            abort(404, f"unknown app {name!r}")
        lang = args.get("lang", "en")
        if lang not in ("en", "zh"):
            abort(400, f"unknown lang {lang!r}")
        seed = int(args.get("seed", 0))
        sid = args.get("sid") or f"s{seed}"
        session = Session(
            sid=sid,
            app=name,
            lang=lang,
            seed=seed,
            theme=args.get("theme", "light"),
            font_scale=float(args.get("font_scale", 1.0)),
            distraction_rate=float(args.get("distraction_rate", 0.0)),
        )
        session.state = APPS[name].initial_state(lang, seed)
        app.config["SESSIONS"].put(session)
        resp = make_response(redirect(f"/{name}/"))
        resp.set_cookie(COOKIE, sid, samesite="Lax")
        return resp

    @app.get("/api/state/<sid>")
    def state(sid: str):
        session = app.config["SESSIONS"].get(sid)
        if session is None:
            abort(404, f"no session {sid!r}")
        return jsonify(session.snapshot())

    @app.before_request
    def load_session():
        g.session = app.config["SESSIONS"].get(request.cookies.get(COOKIE))

    for spec in APPS.values():
        app.register_blueprint(spec.blueprint, url_prefix=f"/{spec.name}")

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    return app


def current_session(app: str | None = None) -> Session:
    """The session of this request; 403 when the page was opened without /start,
    404 when it belongs to another app than `app`."""
    session = getattr(g, "session", None)
    if session is None:
        abort(403, "no sandbox session: open /start first")
    if app is not None and session.app != app:
        abort(404, f"this session is for {session.app!r}, not {app!r}")
    return session


def render_page(template: str, **ctx):
    """Render `<app>/<lang>/<template>` for the current session.

    A page load counts toward the seeded distraction schedule.
    """
    session = current_session()
    with session.lock:
        session.page_loads += 1
        distraction = pick_distraction(session)
    return render_template(
        f"{session.app}/{session.lang}/{template}",
        s=session,
        state=session.state,
        distraction=distraction,
        **ctx,
    )


def start_url(
    base_url: str,
    *,
    sid: str,
    app: str,
    lang: str,
    seed: int,
    theme: str = "light",
    font_scale: float = 1.0,
    distraction_rate: float = 0.0,
) -> str:
    q = urlencode(
        {
            "sid": sid,
            "app": app,
            "lang": lang,
            "seed": seed,
            "theme": theme,
            "font_scale": font_scale,
            "distraction_rate": distraction_rate,
        }
    )
    return f"{base_url}/start?{q}"


class SandboxServer:
    """The sandbox in a background thread of this process, on a free port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.app = create_app()
        self._server = make_server(host, port, self.app, threaded=True)
        self.host = host
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="sandbox-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def sessions(self) -> SessionRegistry:
        return self.app.config["SESSIONS"]

    def state(self, sid: str) -> dict:
        session = self.sessions.get(sid)
        if session is None:
            raise KeyError(f"no sandbox session {sid!r}")
        return session.snapshot()

    def start(self) -> SandboxServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:  # python -m sandbox.server [port]
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    server = SandboxServer(port=port)
    print(f"sandbox on {server.url}", flush=True)
    server._server.serve_forever()


if __name__ == "__main__":
    main()
