"""The environment server's soak: N sessions x M minutes of random actions through a
recording server, a client and a browser killed mid-episode, and the rows it reports."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Row, fmt_num, load, pct, say  # noqa: E402
from env_server_procs import (  # noqa: E402
    Served,
    TreeSampler,
    browser_mains,
    chromium_alive,
    chromium_on_machine,
    process_started,
    tree_memory,
)

SOAK_IDLE_TIMEOUT_S = 15.0
SOAK_MAX_STEPS = 10
# 32 sessions on 2 cores: a reset that launches a browser can wait minutes for a core.
SOAK_CLIENT_TIMEOUT_S = 600.0


# -- 4. the soak -----------------------------------------------------------------------------
_VANISHING_CLIENT = """
import sys, time
from trajforge.envs import RemoteEnv
env = RemoteEnv(sys.argv[1], "sandbox", policy_id="soak-vanished")
env.reset(seed=5)
env.step({"type": "scroll", "direction": "down"})
print(env.session_id, flush=True)
time.sleep(3600)
"""


class SoakClient:
    """One session of random actions until the deadline; what it played, by its own count."""

    def __init__(self, url: str, i: int, deadline: float):
        self.url, self.i, self.deadline = url, i, deadline
        self.policy = f"soak-{i}"
        self.episodes = 0  # resets that opened an episode
        self.recordable = 0  # episodes the store must hold (a step taken, or the env failed)
        self.steps = 0
        self.errors: Counter = Counter()
        self.reset_s: list[float] = []
        self.step_s: list[float] = []
        self.log: dict[int, dict] = {}  # episode seed -> its steps and how it ended

    def run(self) -> None:
        import httpx

        from trajforge.envs import RemoteEnv, RemoteEnvError

        env = RemoteEnv(self.url, "sandbox", policy_id=self.policy, timeout=SOAK_CLIENT_TIMEOUT_S)
        env.action_space.seed(self.i)
        stepped, seed = False, 1000 * self.i
        episode: dict = {}
        try:
            need_reset = True
            while time.monotonic() < self.deadline:
                try:
                    if need_reset:
                        t = time.perf_counter()
                        env.reset(seed=seed)
                        self.reset_s.append(time.perf_counter() - t)
                        episode = self.log[seed] = {"steps": 0, "end": "open"}
                        seed += 1
                        self.episodes += 1
                        stepped, need_reset = False, False
                    t = time.perf_counter()
                    _, _, term, trunc, _ = env.step(env.action_space.sample())
                    self.step_s.append(time.perf_counter() - t)
                    self.steps += 1
                    episode["steps"] += 1
                    if not stepped:
                        self.recordable += 1
                    stepped = True
                    need_reset = bool(term or trunc)
                    if need_reset:
                        episode["end"] = "terminated" if term else "truncated"
                except RemoteEnvError as e:
                    self.errors[f"{e.status} {e.kind}"] += 1
                    if e.status == 410:  # reaped or deleted: a new session at the next reset
                        env.session_id = None
                    if e.status == 503 and not need_reset:
                        episode["end"] = f"{e.status} {e.kind}"
                        if not stepped:
                            self.recordable += 1  # the env failed mid-episode: recorded as an error
                            stepped = True
                    need_reset = True
                    time.sleep(0.5)
                except (httpx.TimeoutException, httpx.TransportError):
                    # The server may still finish that call: whether the episode is stored
                    # is unknown, so it is counted apart, not as played or lost.
                    self.errors["client timeout or dropped connection"] += 1
                    episode["end"], episode["ambiguous"] = "client timeout or dropped connection", True
                    if not stepped:
                        stepped = True
                    need_reset = True
        except Exception as e:  # noqa: BLE001 - a client that dies says why in the figures
            self.errors[f"client died: {type(e).__name__}"] += 1
        finally:
            try:
                env.close()  # an episode in play with steps is recorded as a failure
            except Exception as e:  # noqa: BLE001
                self.errors[f"close failed: {type(e).__name__}"] += 1


def kill_a_client(served: Served, idle_timeout: float) -> dict:
    """A client process SIGKILLed mid-episode: seconds until the server reaped its session."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _VANISHING_CLIENT, served.url], env=env, stdout=subprocess.PIPE, text=True
    )
    sid = proc.stdout.readline().strip()
    if not sid:
        proc.kill()
        proc.wait()
        return {"session": None, "reaped_after_s": None, "then_answers": None, "load": load()}
    reaped0 = served.metric("trajforge_env_sessions_reaped_total")
    proc.kill()
    proc.wait()
    t = time.monotonic()
    limit = idle_timeout * 2 + 30
    while time.monotonic() - t < limit:
        if served.metric("trajforge_env_sessions_reaped_total") > reaped0:
            break
        time.sleep(0.25)
    took = time.monotonic() - t
    import httpx

    answer = httpx.post(f"{served.url}/v1/sessions/{sid}/step", json={"action": {"type": "wait"}}, timeout=60)
    return {
        "session": sid,
        "reaped_after_s": round(took, 1) if took < limit else None,
        "then_answers": answer.status_code,
        "load": load(),
    }


def kill_a_browser(served: Served) -> dict:
    """A session's Chromium SIGKILLed during a step: that step's answer, the reset after."""
    from trajforge.envs import RemoteEnv, RemoteEnvError

    out: dict = {"load": load()}
    before = browser_mains(served.proc.pid)
    env = RemoteEnv(served.url, "sandbox", policy_id="soak-crash")
    try:
        for attempt in range(4):  # under the soak's load a reset may answer 503 (page unresponsive)
            try:
                env.reset(seed=7 + 100 * attempt)
                env.step({"type": "scroll", "direction": "down"})
                break
            except RemoteEnvError as e:
                out.setdefault("setup_errors", []).append(f"{e.status} {e.kind}")
        # Other sessions relaunch browsers too (after a 503): of the browsers that appeared
        # while this session opened, only the newest is killed (one browser, never several).
        candidates = browser_mains(served.proc.pid) - before
        out["candidates"] = len(candidates)
        mine = sorted(candidates, key=process_started)[-1:]
        out["browsers_killed"] = len(mine)
        answer: dict = {}

        def long_step() -> None:
            try:
                env.step({"type": "wait", "duration_ms": 2500})
                answer["status"] = 200
            except RemoteEnvError as e:
                answer["status"], answer["kind"] = e.status, e.kind

        th = threading.Thread(target=long_step)
        th.start()
        time.sleep(0.8)
        import psutil

        for pid in mine:  # the browser and everything below it
            try:
                for p in [*psutil.Process(pid).children(recursive=True), psutil.Process(pid)]:
                    p.kill()
            except psutil.Error:
                pass
        th.join()
        out["step_status"], out["step_kind"] = answer.get("status"), answer.get("kind")
        t = time.perf_counter()
        try:
            env.reset(seed=8)
            out["reset_status"] = 200
        except RemoteEnvError as e:
            out["reset_status"] = e.status
        out["reset_s"] = time.perf_counter() - t
        try:
            env.step({"type": "scroll", "direction": "down"})
            out["next_step_status"] = 200
        except RemoteEnvError as e:
            out["next_step_status"] = e.status
    finally:
        env.close()
    return out


def soak(sessions: int, minutes: float, root: Path) -> dict:
    """N sessions x M minutes of random actions through a recording server; the checks."""
    from trajforge.store.raw import RawStore

    machine_before = chromium_on_machine()
    served = Served(
        ["sandbox"],
        data=root / "soak",
        max_sessions=sessions + 3,
        idle_timeout=SOAK_IDLE_TIMEOUT_S,
        max_steps=SOAK_MAX_STEPS,
    )
    out: dict = {"sessions": sessions, "minutes": minutes, "idle_timeout_s": SOAK_IDLE_TIMEOUT_S}
    with served, TreeSampler(served.proc.pid, interval_s=1.0) as sampler:
        start = time.monotonic()
        deadline = start + minutes * 60
        clients = [SoakClient(served.url, i, deadline) for i in range(sessions)]
        threads = [threading.Thread(target=c.run, daemon=True) for c in clients]
        for th in threads:
            th.start()
        # Once every session is open and stepping: the failures, in the middle of the soak.
        time.sleep(min(max(20.0, minutes * 60 * 0.25), minutes * 60 * 0.5))
        out["quarter_pss_mb"] = tree_memory(served.proc.pid, pss=True)["pss"]  # what RSS double counts
        try:
            out["kill_browser"] = kill_a_browser(served)
        except Exception as e:  # noqa: BLE001 - the soak goes on; the figures say what failed
            out["kill_browser"] = {"failed": f"{type(e).__name__}: {e}"[:300], "load": load()}
        say(f"soak: browser killed mid-step: {out['kill_browser']}")
        out["kill_client"] = kill_a_client(served, SOAK_IDLE_TIMEOUT_S)
        say(f"soak: client killed mid-episode: {out['kill_client']}")
        time.sleep(max(0.0, deadline - 10 - time.monotonic()))
        out["final_pss_mb"] = tree_memory(served.proc.pid, pss=True)["pss"]  # every session still open
        for th in threads:
            th.join(timeout=max(0.0, deadline - time.monotonic()) + 180)
        out["after_close_rss_mb"] = sampler.sample()  # every client closed its session
        end = deadline  # the clients stop at the deadline, then close their sessions
        samples = [(t - start, r) for t, r in sampler.samples if start <= t <= end]
        # The end: the last seconds before the deadline, every session still open.
        last = [r for t, r in samples if t >= end - start - 6.0]
        out["final_rss_mb"] = statistics.median(last) if last else 0.0
        out["peak_rss_mb"] = max((r for _, r in samples), default=0.0)
        out["quarter_rss_mb"] = _rss_at(samples, 0.25 * (end - start))
        # A slope over less than 3 minutes says more about context churn than about a leak.
        late = [(t / 60, r) for t, r in samples if t >= 0.25 * (end - start)]
        out["rss_slope_mb_per_min"] = _slope(late) if end - start >= 180 else None
        out["rss_samples"] = [(round(t, 1), round(r)) for t, r in samples[:: max(1, len(samples) // 60)]]
        out["load_during"] = load()
        out["stop_s"] = served.stop()
        seen = set(sampler.chromium)
    time.sleep(3.0)  # Chromium's helpers exit after their browser
    out["chromium_seen"] = len(seen)
    out["chromium_left"] = len(chromium_alive(seen))
    out["machine_chromium_before"], out["machine_chromium_after"] = machine_before, chromium_on_machine()
    # The store against what the clients played.
    trajs = list(RawStore(served.data / "raw").iter_trajectories("gym/sandbox"))
    by_policy = Counter(t.source_name.rsplit(":", 1)[-1] for t in trajs)
    outcomes = Counter(t.outcome for t in trajs)
    expected = {c.policy: c.recordable for c in clients}
    out["clients"] = {
        c.policy: {
            "episodes": c.episodes,
            "recordable": c.recordable,
            "recorded": by_policy.get(c.policy, 0),
            "steps": c.steps,
            "errors": dict(c.errors),
        }
        for c in clients
    }
    # Which episodes are missing (by seed), and how they ended on the client's side.
    stored = {(t.source_name.rsplit(":", 1)[-1], t.seed): t for t in trajs}
    out["missing"] = [
        {"policy": c.policy, "seed": seed, **ep}
        for c in clients
        for seed, ep in c.log.items()
        if (ep["steps"] or ep["end"].startswith("503"))
        and not ep.get("ambiguous")
        and (c.policy, seed) not in stored
    ]
    out["ambiguous"] = sum(1 for c in clients for ep in c.log.values() if ep.get("ambiguous"))
    out["episodes_played"] = sum(expected.values())
    out["episodes_recorded"] = sum(by_policy.get(p, 0) for p in expected)
    out["lost"] = len(out["missing"])  # by seed: an extra stored episode cannot hide a lost one
    out["steps"] = sum(c.steps for c in clients)
    out["step_p50_s"] = pct([s for c in clients for s in c.step_s], 0.5)
    out["reset_p50_s"] = pct([s for c in clients for s in c.reset_s], 0.5)
    out["outcomes"] = dict(outcomes)
    vanished = [t for t in trajs if t.source_name.endswith(":soak-vanished")]
    out["kill_client"]["recorded"] = [(t.outcome, t.error) for t in vanished]
    crashed = [t for t in trajs if t.source_name.endswith(":soak-crash")]
    out["kill_browser"]["recorded"] = [(t.outcome, (t.error or "")[:80]) for t in crashed]
    return out


def _rss_at(samples: list[tuple[float, float]], at: float) -> float:
    near = [r for t, r in samples if abs(t - at) <= 5.0] or [r for _, r in samples]
    return statistics.median(near) if near else 0.0


def _slope(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else None


# -- the run ---------------------------------------------------------------------------------
@contextmanager
def soak_rows(s: dict, mach: str) -> list[Row]:
    kb, kc = s["kill_browser"], s["kill_client"]
    head = f"{s['sessions']} sessions x {s['minutes']:g} min, {s['steps']} steps"
    browser_ok = kb.get("step_status") == 503 and kb.get("reset_status") == 200
    client_ok = kc.get("reaped_after_s") is not None and kc.get("then_answers") == 410
    return [
        Row(
            "env_server",
            "soak: browser processes left after the server stops",
            s["chromium_left"],
            s["chromium_seen"],
            "processes",
            "Chromium processes the server's tree ran",
            target="<= 0",
            note=(
                f"{head}; the server stopped (SIGINT) in {s['stop_s']:.1f} s; Chromium on the whole machine "
                f"(other jobs' too) {s['machine_chromium_before']} before, {s['machine_chromium_after']} after"
            ),
            machine=mach,
        ),
        Row(
            "env_server",
            "soak: episodes in the store / episodes played",
            s["episodes_recorded"],
            s["episodes_played"],
            "episodes",
            "episodes the clients played (a step taken, or the env failed)",
            target=">= 1",
            note=f"{head}; {s['lost']} lost {s.get('missing') or ''}; outcomes {s['outcomes']}; step P50 "
            f"{(s['step_p50_s'] or 0) * 1000:.0f} ms, reset P50 {(s['reset_p50_s'] or 0) * 1000:.0f} ms",
            machine=mach,
        ),
        Row(
            "env_server",
            "soak: server tree RSS at the end",
            s["final_rss_mb"],
            s["quarter_rss_mb"],
            "MB",
            "the same a quarter into the soak",
            note=(
                f"{head}; peak {s['peak_rss_mb']:.0f} MB; {s['after_close_rss_mb']:.0f} MB once the "
                f"clients closed their sessions; slope from a quarter on "
                f"{fmt_num(s['rss_slope_mb_per_min'])} MB/min; load {s['load_during']}"
            ),
            machine=mach,
        ),
        Row(
            "env_server",
            "soak: a SIGKILLed client's session reaped after",
            kc["reaped_after_s"],
            s["idle_timeout_s"],
            "s",
            "--idle-timeout",
            target="<= 1.5",
            note=(
                f"{'as designed' if client_ok else 'NOT AS DESIGNED'}: its id then answers "
                f"{kc['then_answers']}; recorded {kc.get('recorded')}"
            ),
            machine=mach,
        ),
        Row(
            "env_server",
            "soak: a browser SIGKILLed mid-step, the reset after it",
            kb.get("reset_s"),
            (s["reset_p50_s"] or 0) or None,
            "s",
            "the soak's reset P50",
            note=(
                f"{'as designed' if browser_ok else 'NOT AS DESIGNED'}: that step answered "
                f"{kb.get('step_status')} {kb.get('step_kind') or ''}, the reset {kb.get('reset_status')}, "
                f"the next step {kb.get('next_step_status')}; recorded {kb.get('recorded')}"
            ),
            machine=mach,
        ),
    ]
