"""Desktop environments: step and reset latency, sessions per GB, accessibility-tree reads.

    .venv/bin/python benchmarks/desktop.py --mode quick

In one run, on the Debian apps of examples/environments/ (mousepad; gnumeric and
pcmanfm where their files exist), each in a DesktopEnv of its own (Xvfb, D-Bus, the
AT-SPI bus and reader, the app):

1. step latency on mousepad: DesktopEnv.step(tap on the text area) (the XTEST click,
   the settle, the screenshot, the tree read and its normalisation, the PNG) against a
   bare XTEST click + X screenshot loop on the same app and display, in alternating
   blocks (load drifts hit both); P50 and P95;
2. reset latency per app: DesktopEnv.reset (the app killed, a fresh HOME, setup,
   launch, wait_for through the tree, the window filled, an observation) against a
   bare relaunch on the same session (the app killed, setup, launch, until the X
   server maps a titled window), the same rounds alternating; P50 and P95;
3. sessions per GB: 1, 4 and 8 DesktopEnvs open on mousepad (one episode each), the
   PSS of every process of their sessions (Xvfb, the buses, the reader, the app);
   baseline: the same sessions with the app's accessibility bridge off and no reader
   (NO_AT_BRIDGE=1), i.e. what the accessibility layer costs in memory;
4. the accessibility-tree read per observation (the reader's round trip for the whole
   tree) per app, against the X screenshot of the same observations.

Every figure is printed with the load average it was measured under; on the shared
2-core machines only the ratios compare between runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Row, fmt_num, fmt_ratio, load, machine_short, not_run, pct, pick, say  # noqa: E402

BENCH = "desktop"
APPS = ("mousepad", "gnumeric", "pcmanfm")
SIZES = {
    "smoke": {"blocks": 2, "block_steps": 3, "resets": 2, "density": (1,), "apps": ("mousepad",)},
    "quick": {"blocks": 6, "block_steps": 5, "resets": 6, "density": (1, 4, 8), "apps": APPS},
    "full": {"blocks": 10, "block_steps": 6, "resets": 12, "density": (1, 4, 8), "apps": APPS},
}


def env_file(app: str) -> Path:
    return ROOT / "examples" / "environments" / f"{app}.yaml"


def open_env(app: str, *, bridge: bool = True):
    """A DesktopEnv over the app's example file (bridge=False: the accessibility bridge
    off, for the memory baseline: the app launched with NO_AT_BRIDGE=1)."""
    from crawlers.desktop_env import DesktopEnv
    from schemas.environment import load_environment

    environment = load_environment(env_file(app))
    if not bridge:
        launch = environment.launch
        line = launch if isinstance(launch, str) else " ".join(launch)
        environment = environment.model_copy(
            update={"launch": f"NO_AT_BRIDGE=1 GTK_MODULES= exec {line}", "wait_for": None}
        )
    return DesktopEnv(environment), environment


def app_url(environment) -> str:
    """What a desktop env's reset takes for its app (crawlers.env_runtime.start_url)."""
    return f"desktop://{environment.name}"


def first_task(environment):
    tasks = environment.as_tasks()
    return (tasks[0], dict(tasks[0].params)) if tasks else (None, {})


# -- 1 and 4. steps, and the tree read per observation --------------------------------------
def step_latency(blocks: int, block_steps: int) -> dict:
    from schemas.actions import Action, ActionType

    env, environment = open_env("mousepad")
    try:
        task, values = first_task(environment)
        obs = env.reset(app_url(environment), task=task, values=values)
        box = obs.find(role="textbox")[0]
        x, y = box.centre()
        px, py = env._px(x, y)
        tap = Action(type=ActionType.TAP, x=x, y=y)
        env.step(tap)  # warm: the first step's caches
        env.tree_ms.clear()
        ours, bare, shots = [], [], []
        for _ in range(blocks):
            for _ in range(block_steps):
                t = time.perf_counter()
                env.step(tap)
                ours.append((time.perf_counter() - t) * 1000)
            for _ in range(block_steps):
                t = time.perf_counter()
                env.screen.click(px, py)
                s = time.perf_counter()
                env.screen.screenshot()
                now = time.perf_counter()
                bare.append((now - t) * 1000)
                shots.append((now - s) * 1000)
        return {
            "steps": len(ours),
            "p50_ms": pct(ours, 0.5),
            "p95_ms": pct(ours, 0.95),
            "bare_p50_ms": pct(bare, 0.5),
            "bare_p95_ms": pct(bare, 0.95),
            "tree_p50_ms": pct(env.tree_ms, 0.5),
            "shot_p50_ms": pct(shots, 0.5),
            "elements": len(obs.elements),
            "load": load(),
        }
    finally:
        env.close()


# -- 2. resets, and 4. per app ---------------------------------------------------------------
def bare_reset(env, environment, task, values) -> float:
    """The app killed, a fresh HOME, setup, launch, until the X server maps a titled window."""
    from crawlers.desktop_env import _argv

    t = time.perf_counter()
    reader = env.reader.proc if env.reader is not None else None
    env.session.kill_apps(spare=(reader.pid,) if reader is not None else ())  # as a reset does
    env.session.fresh_home()
    env.task, env.values = task, values
    if environment.setup:
        env._run_commands(environment.setup, "setup")
    env.session.launch(_argv(environment.launch))
    deadline = time.monotonic() + environment.wait_timeout_s
    while not env.screen.stacking_titles():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{environment.name}: no window within {environment.wait_timeout_s} s")
        time.sleep(0.02)
    return time.perf_counter() - t


def reset_latency(app: str, resets: int) -> dict:
    env, environment = open_env(app)
    try:
        task, values = first_task(environment)
        t = time.perf_counter()
        env.reset(app_url(environment), task=task, values=values)  # the session's start (X, buses) apart
        first = time.perf_counter() - t
        bare_reset(env, environment, task, values)  # warm
        ours, bare, tree_ms, nodes = [], [], [], []
        for _ in range(resets):
            env.tree_ms.clear()
            t = time.perf_counter()
            obs = env.reset(app_url(environment), task=task, values=values)
            ours.append(time.perf_counter() - t)
            tree_ms.extend(env.tree_ms)
            nodes.append(len(obs.elements))
            bare.append(bare_reset(env, environment, task, values))
        shots = []
        for _ in range(5):
            s = time.perf_counter()
            env.screen.screenshot()
            shots.append((time.perf_counter() - s) * 1000)
        return {
            "app": app,
            "first_s": first,
            "resets": len(ours),
            "p50_s": pct(ours, 0.5),
            "p95_s": pct(ours, 0.95),
            "bare_p50_s": pct(bare, 0.5),
            "bare_p95_s": pct(bare, 0.95),
            "tree_p50_ms": pct(tree_ms, 0.5),
            "tree_p95_ms": pct(tree_ms, 0.95),
            "shot_p50_ms": pct(shots, 0.5),
            "elements": statistics.median(nodes) if nodes else None,
            "load": load(),
        }
    finally:
        env.close()


# -- 3. sessions per GB ------------------------------------------------------------------------
def session_pss_mb(envs) -> float:
    """PSS of every process of these sessions (they carry the session's token), in MB."""
    import psutil

    total = 0.0
    for env in envs:
        for pid in env.session.pids():
            try:
                total += psutil.Process(pid).memory_full_info().pss / 2**20
            except psutil.Error:
                continue
    return total


def density(n: int, *, bridge: bool) -> dict:
    envs = []
    try:
        for _ in range(n):
            env, environment = open_env("mousepad", bridge=bridge)
            envs.append(env)
            task, values = first_task(environment)
            if bridge:
                env.reset(app_url(environment), task=task, values=values)
            else:  # no tree to wait on: the app's window, as the bare reset waits for it
                env._open_session()
                bare_reset(env, environment, task, values)
        time.sleep(1.0)  # the apps' start-up allocations settle
        pss = session_pss_mb(envs)
        procs = sum(len(e.session.pids()) for e in envs)
        return {"sessions": n, "pss_mb": round(pss, 1), "processes": procs, "load": load()}
    finally:
        for env in envs:
            env.close()


def measure(mode: str) -> dict:
    sizes = pick(mode, SIZES)
    say(f"desktop benchmark, mode {mode}")
    m: dict = {"mode": mode}
    m["step"] = step_latency(sizes["blocks"], sizes["block_steps"])
    say("step", m["step"])
    m["reset"] = []
    for app in sizes["apps"]:
        if not env_file(app).exists() or shutil.which(app) is None:
            m["reset"].append({"app": app, "skipped": f"no examples/environments/{app}.yaml or no {app}"})
            continue
        m["reset"].append(reset_latency(app, sizes["resets"]))
        say("reset", m["reset"][-1])
    m["density"] = []
    for n in sizes["density"]:
        row = {"n": n, "with": density(n, bridge=True), "bare": density(n, bridge=False)}
        m["density"].append(row)
        say("density", row)
    return m


def rows_from(m: dict) -> list[Row]:
    machine = machine_short()
    s = m["step"]
    step_note = (
        f"mousepad, {s['steps']} taps on its text area, alternating blocks; bare: XTEST click + "
        f"X GetImage on the same display; load {s['load']}"
    )
    rows = [
        Row(BENCH, "desktop step P50 (mousepad)", s["p50_ms"], s["bare_p50_ms"], "ms",
            "bare XTEST click + X screenshot", note=step_note, machine=machine),
        Row(BENCH, "desktop step P95 (mousepad)", s["p95_ms"], s["bare_p95_ms"], "ms",
            "bare XTEST click + X screenshot", note=step_note, machine=machine),
    ]  # fmt: skip
    for r in m["reset"]:
        if "skipped" in r:
            rows.append(not_run(BENCH, f"desktop reset P50 ({r['app']})", r["skipped"], "s"))
            continue
        note = (
            f"{r['resets']} resets; bare: the app killed, setup, launch, until a titled window is "
            f"mapped; first reset (X, buses) {r['first_s']:.1f} s; load {r['load']}"
        )
        rows += [
            Row(BENCH, f"desktop reset P50 ({r['app']})", r["p50_s"], r["bare_p50_s"], "s",
                "bare relaunch to a mapped window", note=note, machine=machine),
            Row(BENCH, f"desktop reset P95 ({r['app']})", r["p95_s"], r["bare_p95_s"], "s",
                "bare relaunch to a mapped window", note=note, machine=machine),
            Row(BENCH, f"accessibility-tree read per observation P50 ({r['app']})", r["tree_p50_ms"],
                r["shot_p50_ms"], "ms", "X screenshot of the same screen",
                note=f"whole tree, {r['elements']} elements; P95 {fmt_num(r['tree_p95_ms'])} ms; load {r['load']}",
                machine=machine),
        ]  # fmt: skip
    for d in m["density"]:
        n, ours, bare = d["n"], d["with"], d["bare"]
        per_gb = n / (ours["pss_mb"] / 1024) if ours["pss_mb"] else None
        bare_gb = n / (bare["pss_mb"] / 1024) if bare["pss_mb"] else None
        rows.append(
            Row(BENCH, f"desktop sessions per GB, {n} open (mousepad)", per_gb, bare_gb, "sessions/GB",
                "the same sessions, accessibility bridge off, no reader",
                note=f"PSS of the sessions' processes {ours['pss_mb']:.0f} MB ({ours['processes']} processes) "
                f"vs {bare['pss_mb']:.0f} MB ({bare['processes']}); load {ours['load']}",
                machine=machine,
                extra={"pss_mb": ours["pss_mb"], "processes": ours["processes"],
                       "bare_pss_mb": bare["pss_mb"], "bare_processes": bare["processes"]})
        )  # fmt: skip
    return rows


def run(mode: str) -> list[Row]:
    return rows_from(measure(mode))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    ap.add_argument("--json", type=Path, default=None, help="write the measurements here")
    args = ap.parse_args()
    m = measure(args.mode)
    if args.json:
        args.json.write_text(json.dumps(m, indent=2, default=str))
    print(json.dumps(m, indent=2, default=str))
    for r in rows_from(m):
        print(f"{r.name}: {fmt_num(r.figure)} vs {fmt_num(r.baseline)} {r.unit} = {fmt_ratio(r.ratio)}")
        print(f"  {r.note} [{r.machine}]")


if __name__ == "__main__":
    main()
