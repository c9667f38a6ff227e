"""One end state judged by many verifiers (validation judges every task on each end
state): with a StateMemo each probe is read once and the tree parsed once, and the
verdicts are those read without it. Against a real HTTP server on loopback that counts
the GETs it answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawlers.env_probes import StateMemo, predicates_verdict
from schemas.observation import Observation
from schemas.predicates import Predicate, ProbeSpec

TREE = '- heading "Notes" [level=1]\n- listitem "Buy milk"\n- listitem "Call Ann"'


@pytest.fixture
def titles_server():
    """(its URL, the GETs it answered): the titles the app holds, as JSON."""
    gets: list[str] = []

    class Titles(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            gets.append(self.path)
            body = json.dumps(["Buy milk", "Call Ann"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Titles)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", gets
    server.shutdown()
    server.server_close()


def test_a_memo_reads_each_probe_once_per_state_with_the_same_verdicts(titles_server):
    url, gets = titles_server
    probes = {
        "titles": ProbeSpec(http=url + "/titles"),
        "count": ProbeSpec(http=url + "/titles", pick="length"),
        "mine": ProbeSpec(http=url + "/titles/{task_id}"),
    }
    obs = Observation(b"", "png", 1, 1, "http://app/notes", TREE)
    goals = [
        [{"probe": "titles", "contains": "Buy milk"}],
        [{"probe": "titles", "contains": "Walk dog"}, {"element": {"role": "heading", "name": "Notes"}}],
        [{"probe": "count", "equals": 2}, {"element": {"role": "listitem", "name": "Call Ann"}}],
        [{"element": {"role": "listitem", "name_contains": "milk"}}],
    ]
    sets = [[Predicate.model_validate(p) for p in goal] for goal in goals]
    values = {"task_id": "t1"}

    plain = [predicates_verdict(ps, probes, None, obs, values)["success"] for ps in sets]
    assert plain == [True, False, True, True] and len(gets) == 3  # one GET per verdict naming a probe

    gets.clear()
    memo = StateMemo()
    shared = [predicates_verdict(ps, probes, None, obs, values, memo)["success"] for ps in sets]
    assert shared == plain
    assert gets == ["/titles"] * 2  # titles and count: one GET each, however many verdicts
    assert len(memo.states) == 1  # the tree parsed once

    # A placeholder filled otherwise is another read; a new memo (a new state) reads again.
    mine = [Predicate.model_validate({"probe": "mine", "not_equals": 1})]
    for task_id in ("t1", "t2", "t1"):
        predicates_verdict(mine, probes, None, obs, {"task_id": task_id}, memo)
    assert gets[2:] == ["/titles/t1", "/titles/t2"]
    predicates_verdict(sets[0], probes, None, obs, values, StateMemo())
    assert gets[-1] == "/titles" and len(gets) == 5
