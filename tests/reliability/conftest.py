"""Shared checks for the fault tests: a store left whole, a site whose pages never load."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pyarrow.parquet as pq
import pytest

from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, row_to_step, row_to_trajectory
from trajforge.store.raw import WRITERS_LOCK, RawStore


def check_store_whole(store: RawStore, collection: str) -> tuple[list, list]:
    """After a fault: every Parquet file reads, each trajectory is stored once, whole.

    Returns (trajectories, steps). Fails on a duplicate id (counted over rows,
    not a set), a step without its committed trajectory, a step count that
    differs from num_steps, a screenshot whose bytes do not hash to its name,
    or any temporary / uncommitted file left in the collection.
    """
    folder = store.root / collection
    trajs, steps = [], []
    for f in sorted(folder.glob("part-*.trajectories.parquet")):
        table = pq.read_table(f)  # a torn file raises here
        assert table.schema.equals(TRAJECTORY_SCHEMA, check_metadata=False), f
        trajs += [row_to_trajectory(r, source=str(f)) for r in table.to_pylist()]
    for f in sorted(folder.glob("part-*.steps.parquet")):
        table = pq.read_table(f)
        assert table.schema.equals(STEP_SCHEMA, check_metadata=False), f
        steps += [row_to_step(r, source=str(f)) for r in table.to_pylist()]
    ids = Counter(t.trajectory_id for t in trajs)
    assert not [i for i, n in ids.items() if n > 1], f"duplicate trajectories: {ids}"
    per_traj = Counter(s.trajectory_id for s in steps)
    assert set(per_traj) <= set(ids), "steps without a committed trajectory"
    for t in trajs:
        idx = sorted(s.index for s in steps if s.trajectory_id == t.trajectory_id)
        assert idx == list(range(t.num_steps)), f"{t.trajectory_id}: step indices {idx}"
    for s in steps:
        if s.screenshot:
            data = store.blobs.get(s.screenshot, s.image_format)
            assert hashlib.sha256(data).hexdigest() == s.screenshot
    # The writers' lock file stays (it is a lock, not a half-written file).
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != WRITERS_LOCK]
    assert not leftovers, f"temporary files left: {leftovers}"
    assert len(list(folder.glob("part-*.steps.parquet"))) == len(
        list(folder.glob("part-*.trajectories.parquet"))
    ), "a batch without its commit"
    return trajs, steps


def blob_files_intact(store: RawStore) -> int:
    """Every file in the blob store hashes to its name (no torn screenshot); returns the count."""
    n = 0
    for p in store.blobs.root.rglob("*"):
        if p.is_file():
            assert not p.name.startswith("."), f"temporary blob left: {p}"
            assert hashlib.sha256(p.read_bytes()).hexdigest() == p.name.split(".")[0], p
            n += 1
    return n


# -- a site whose pages never finish loading -----------------------------------------
PAGE = (
    "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
    "</head><body><h1>{title}</h1>{body}</body></html>"
)
BEHAVIOURS = {
    # The document itself never arrives.
    "hang_document": None,
    # The document arrives, an image never does: the `load` event never fires.
    "hang_image": PAGE.format(title="Slow image", body="<img alt='never' src='/never'>"),
    # A healthy page whose only control leads to a page that never arrives.
    "hang_link": PAGE.format(title="Links", body="<a href='/never'>Next page</a>"),
    # Not a hang: page text holding half an emoji (a lone UTF-16 surrogate),
    # which Chromium hands over as is and UTF-8 / Parquet cannot store.
    "half_emoji": PAGE.format(
        title="Half emoji",
        body=(
            "<button id='pay'>x</button><script>"
            "document.getElementById('pay').textContent = 'Pay \\uD83D now';</script>"
        ),
    ),
}


class _Handler(BaseHTTPRequestHandler):
    stop: threading.Event
    hits: Counter

    def do_GET(self):
        u = urlparse(self.path)
        app = parse_qs(u.query).get("app", [""])[0]
        self.hits[u.path if u.path != "/start" else f"/start:{app}"] += 1
        if u.path == "/start" and BEHAVIOURS.get(app) is not None:
            return self._send(200, BEHAVIOURS[app].encode())
        if u.path.startswith("/api/state/"):  # no sandbox state: the outcome stays unknown
            return self._send(404, b"{}")
        self.stop.wait(120)  # /never and hang_document: hold the request open

    def _send(self, code: int, body: bytes) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def hanging_site():
    """A sandbox-free HTTP server: /start?app=<behaviour> (see BEHAVIOURS)."""
    stop, hits = threading.Event(), Counter()
    handler = type("Handler", (_Handler,), {"stop": stop, "hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_port}"
    server.hits = hits
    try:
        yield server
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
