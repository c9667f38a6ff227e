"""Resets and throughput through `trajforge serve`, warm (the warm pool) against cold.

    .venv/bin/python benchmarks/env_server_warm.py --quick
    .venv/bin/python benchmarks/env_server_warm.py --envs sandbox --sessions 4 16 64 --seconds 60

A plain HTTP client (httpx.AsyncClient, every session in one client process) plays N
sessions at once on each environment: the embedded sandbox, and four MiniWoB-like
pages (click a button, type a word, tick boxes, follow a link: one small static page
each, served here, with a JS verifier). Each session opens (its browser launches; not
timed, nor, warm, the spare's launch and first hand-over), then for `--seconds`: an episode of `--steps` random taps, each after
`--think-s` (the trainer generating its next action), then a reset to the next task and
seed. Cold: the client names no next episode. Warm: each reset (and the session's
creation) announces the next one (`next: {task_id, seed}`), so the server prepares it
on the session's spare environment while the episode plays.

Printed per environment and session count, cold and warm, in the same run (the
baseline of each warm figure is the cold one beside it): reset P50/P95 seen by the
client, step P50, environment steps per second per core (steps / wall / cores), and
the share of the sessions' time spent waiting on resets; the issue's bounds: warm P50
<= 50 ms and P95 <= 200 ms at 4 and 16 sessions; cold P50 <= 0.5 s at 4 sessions.
Every figure carries the load average it ran under: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load, pct, say  # noqa: E402
from env_server_procs import Served  # noqa: E402

# MiniWoB-like pages: one small page per task, its verdict read by a JS verifier.
PAGES = {
    "click-button": (
        "Click the button labelled OK",
        '<button onclick="document.body.dataset.done=1">Cancel</button> '
        '<button onclick="document.body.dataset.ok=1;document.body.dataset.done=1">OK</button>',
        "({done: !!document.body.dataset.done, success: !!document.body.dataset.ok})",
    ),
    "enter-text": (
        "Type the word river into the box and press Submit",
        '<input id="t" autofocus> <button onclick="document.body.dataset.done=1">Submit</button>',
        "({done: !!document.body.dataset.done, "
        "success: document.getElementById('t').value.trim() === 'river'})",
    ),
    "click-checkboxes": (
        "Tick red and blue, then press Submit",
        "".join(f'<label><input type="checkbox" id="{c}">{c}</label><br>' for c in ("red", "green", "blue"))
        + '<button onclick="document.body.dataset.done=1">Submit</button>',
        "({done: !!document.body.dataset.done, success: red.checked && blue.checked && !green.checked})",
    ),
    "click-link": (
        "Follow the link named Lorem",
        '<p>Ipsum <a href="#lorem" onclick="document.body.dataset.done=1;document.body.dataset.ok=1">'
        'Lorem</a> dolor <a href="#sit" onclick="document.body.dataset.done=1">sit</a></p>',
        "({done: !!document.body.dataset.done, success: !!document.body.dataset.ok})",
    ),
}


def miniwob_site(folder: Path, reset_mode: str = "context") -> tuple[http.server.ThreadingHTTPServer, Path]:
    """The pages served on loopback (a thread of this process) and their environment file
    (`reset_mode` page: one page kept across episodes, the next start page loaded in it)."""
    for name, (_, body, _) in PAGES.items():
        html = f'<!doctype html><html><head><title>{name}</title></head><body style="width:160px">{body}</body></html>'
        (folder / f"{name}.html").write_text(html, encoding="utf-8")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(folder))  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    tasks = "".join(
        f"""  - task_id: {name}
    instruction: {json.dumps(instruction)}
    language: en
    start_url: {url}/{name}.html
    verifier: {{kind: js, expression: {json.dumps(verdict)}}}
"""
        for name, (instruction, _, verdict) in PAGES.items()
    )
    env_file = folder / f"miniwob_like_{reset_mode}.yaml"
    env_file.write_text(
        f"""name: miniwob_like{"" if reset_mode == "context" else "_" + reset_mode}
platform: web
start_url: {url}/click-button.html
allow: ["{url}"]
viewport: {{width: 320, height: 240}}
max_steps: 10
reset: {{mode: {reset_mode}}}
tasks:
{tasks}""",
        encoding="utf-8",
    )
    return httpd, env_file


class Session:
    """One session's loop; what it waited on, in seconds."""

    def __init__(self, client: httpx.AsyncClient, env: dict, index: int, warm: bool, args):
        self.client, self.env, self.warm, self.args = client, env, warm, args
        self.rng = random.Random(1000 * index + 7)
        self.resets: list[float] = []
        self.steps: list[float] = []
        self.sid: str | None = None
        self.next = self._draw()

    def _draw(self) -> dict:
        return {"task_id": self.rng.choice(self.env["tasks"]), "seed": self.rng.randrange(1 << 20)}

    async def _post(self, path: str, body: dict) -> dict:
        answer = await self.client.post(path, json=body)
        if answer.status_code != 200:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:300]}")
        return answer.json()

    def _reset_body(self) -> dict:
        body, self.next = self.next, self._draw()
        return {**body, "next": self.next} if self.warm else body

    async def open(self) -> None:
        """The session's browser launched (and, warm, its spare's: one hand-over), untimed."""
        body = await self._post("/v1/sessions", {"env": self.env["name"], **self._reset_body()})
        self.sid = body["session_id"]
        if self.warm:
            await self._post(f"/v1/sessions/{self.sid}/reset", self._reset_body())

    async def play(self, until: float) -> None:
        height, width = self.env["screen"]
        while time.monotonic() < until:
            for _ in range(self.args.steps):
                await asyncio.sleep(self.args.think_s)
                action = {"type": "tap", "x": self.rng.randrange(width), "y": self.rng.randrange(height)}
                t = time.perf_counter()
                answer = await self._post(f"/v1/sessions/{self.sid}/step", {"action": action})
                self.steps.append(time.perf_counter() - t)
                if answer["terminated"] or answer["truncated"]:
                    break
            await asyncio.sleep(self.args.think_s)  # the trainer between episodes
            t = time.perf_counter()
            await self._post(f"/v1/sessions/{self.sid}/reset", self._reset_body())
            self.resets.append(time.perf_counter() - t)

    async def close(self) -> None:
        if self.sid:
            await self.client.delete(f"/v1/sessions/{self.sid}")


async def run_sessions(url: str, env: dict, n: int, warm: bool, args) -> dict:
    limits = httpx.Limits(max_connections=n + 4, max_keepalive_connections=n + 4)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        sessions = [Session(client, env, i, warm, args) for i in range(n)]
        await asyncio.gather(*(s.open() for s in sessions))
        cpu0, t0 = os.times(), time.monotonic()
        before = (await client.get("/v1/health")).json()["resets"]
        await asyncio.gather(*(s.play(t0 + args.seconds) for s in sessions))
        wall = time.monotonic() - t0
        after = (await client.get("/v1/health")).json()["resets"]
        await asyncio.gather(*(s.close() for s in sessions))
    resets = [r for s in sessions for r in s.resets]
    steps = [r for s in sessions for r in s.steps]
    return {
        "env": env["name"],
        "sessions": n,
        "start": "warm" if warm else "cold",
        "resets": len(resets),
        "warm_resets": after["warm"] - before["warm"],
        "reset_p50_s": pct(resets, 0.5),
        "reset_p95_s": pct(resets, 0.95),
        "step_p50_s": pct(steps, 0.5),
        "steps": len(steps),
        "wall_s": round(wall, 1),
        "steps_per_s_per_core": len(steps) / wall / os.cpu_count(),
        "reset_share": sum(resets) / (wall * n),
        "client_cpu_s": round(sum(os.times()[:2]) - sum(cpu0[:2]), 1),
        "load": load(),
    }


def fmt(row: dict) -> str:
    ms = {
        k: round(row[k] * 1000) if row[k] is not None else None for k in row if k.endswith("_s") and "p" in k
    }
    return (
        f"{row['env']:>12} {row['sessions']:>3} {row['start']:>4}: reset P50 {ms['reset_p50_s']} ms "
        f"P95 {ms['reset_p95_s']} ms ({row['warm_resets']}/{row['resets']} warm), step P50 {ms['step_p50_s']} ms, "
        f"{row['steps_per_s_per_core']:.2f} steps/s/core, {row['reset_share']:.0%} of session time in resets "
        f"[load {row['load']}]"
    )


def ratios(cold: dict, warm: dict) -> str:
    def r(key: str) -> str:
        return f"{warm[key] / cold[key]:.2f}" if cold[key] and warm[key] is not None else "—"

    return (
        f"{'':>12} {warm['sessions']:>3} warm/cold: reset P50 x{r('reset_p50_s')}, P95 x{r('reset_p95_s')}, "
        f"steps/s x{r('steps_per_s_per_core')}, reset share x{r('reset_share')}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 and 16 sessions, 25 s each: a short run")
    ap.add_argument(
        "--envs", nargs="+", default=["sandbox", "miniwob"], choices=["sandbox", "miniwob", "miniwob-page"]
    )
    ap.add_argument("--sessions", nargs="+", type=int, default=[4, 16])
    ap.add_argument("--seconds", type=float, default=60.0, help="each run's measured window")
    ap.add_argument("--steps", type=int, default=3, help="random taps per episode")
    ap.add_argument("--think-s", type=float, default=0.3, help="the trainer's time per action")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = ap.parse_args()
    if args.quick:
        args.seconds = min(args.seconds, 25.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        site, env_file = miniwob_site(Path(tmp))
        page_site, page_file = miniwob_site(Path(tmp), "page")
        try:
            for name in args.envs:
                source = {"sandbox": "sandbox", "miniwob": str(env_file), "miniwob-page": str(page_file)}[
                    name
                ]
                with Served(
                    [source],
                    data=Path(tmp) / f"data-{name}",
                    max_sessions=max(args.sessions),
                    idle_timeout=600,
                ) as srv:
                    served = httpx.get(srv.url + "/v1/envs").json()["envs"][0]
                    env = {"name": served["name"], "tasks": served["tasks"], "screen": served["screen"]}
                    for n in args.sessions:
                        pair = {}
                        for warm in (False, True):
                            pair[warm] = row = asyncio.run(run_sessions(srv.url, env, n, warm, args))
                            rows.append(row)
                            say(fmt(row))
                        say(ratios(pair[False], pair[True]))
                    srv.stop()
        finally:
            site.shutdown()
            page_site.shutdown()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
