"""Web sessions per GB with contexts sharing Chromiums (issue 34 item 3).

    .venv/bin/python benchmarks/web_density.py --quick          # 8 and 16 sessions
    .venv/bin/python benchmarks/web_density.py --levels 8 16 32 64 --per-browser 8

For each level, `trajforge serve sandbox` in a subprocess (with `--contexts-per-browser
N`, which shares a thread and driver per Chromium's sessions; with `--contexts-per-browser N
--no-shared-driver`, a driver per session, unless `--no-driver-per-session`; and the
same-run baseline with 1: a Chromium per session) and that many sessions
opened through the server (RemoteEnv, one reset each); then the PSS of the server's
process tree (python, Playwright drivers, Chromiums) less the tree's PSS before any
session: MB per session and sessions per GB. Prints ratios (shared / own browser).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load, say  # noqa: E402
from env_server_procs import Served, tree_memory  # noqa: E402


def measure(level: int, per_browser: int, shared_driver: bool = True, settle_s: float = 3.0) -> dict:
    from trajforge.envs import RemoteEnv

    with tempfile.TemporaryDirectory(prefix="tf-web-density-") as tmp:
        with Served(
            ["sandbox"],
            data=Path(tmp),
            max_sessions=level,
            idle_timeout=3600,
            contexts_per_browser=per_browser,
            **({} if shared_driver else {"no_shared_driver": True}),
        ) as served:
            time.sleep(1.0)
            base = tree_memory(served.proc.pid, pss=True)

            def open_one(i: int):
                env = RemoteEnv(served.url, "sandbox", policy_id=f"density-{i}")
                env.reset(seed=i)
                return env

            t = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                envs = list(pool.map(open_one, range(level)))
            open_s = time.perf_counter() - t
            time.sleep(settle_s)
            mem = tree_memory(served.proc.pid, pss=True)
            for env in envs:
                env.close()
    return {
        "sessions": level,
        "per_browser": per_browser,
        "shared_driver": shared_driver and per_browser > 1,
        "pss_mb": round(mem["pss"], 1),
        "pss_mb_per_session": round(mem["pss"] / level, 1),  # the server's own share included
        "marginal_mb_per_session": round((mem["pss"] - base["pss"]) / level, 1),
        "sessions_per_gb": round(1024 / (mem["pss"] / level), 2),
        "open_s": round(open_s, 1),
        "chromiums": mem.get("n_chromium", 0),
        "drivers": mem.get("n_node", 0),
        "load": round(load(), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--per-browser", type=int, default=8, help="--contexts-per-browser of the shared runs")
    ap.add_argument("--quick", action="store_true", help="8 and 16 sessions only (2 shared cores)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the one-Chromium-per-session runs")
    ap.add_argument(
        "--no-driver-per-session", action="store_true", help="skip the shared runs with --no-shared-driver"
    )
    args = ap.parse_args()
    levels = [8, 16] if args.quick else args.levels
    for level in levels:
        shared = measure(level, args.per_browser)
        say(f"{level} sessions, {args.per_browser} contexts per Chromium, a driver per Chromium: {shared}")
        if not args.no_driver_per_session:
            apart = measure(level, args.per_browser, shared_driver=False)
            say(f"{level} sessions, {args.per_browser} contexts per Chromium, a driver per session: {apart}")
            say(
                f"- PSS per session, {level} open: {shared['pss_mb_per_session']} MB with a driver per "
                f"Chromium against {apart['pss_mb_per_session']} with a driver per session (same run)"
            )
        if args.no_baseline:
            continue
        own = measure(level, 1)
        say(f"{level} sessions, a Chromium each: {own}")
        say(
            f"- web sessions per GB of tree PSS, {level} open: {shared['sessions_per_gb']} against "
            f"{own['sessions_per_gb']} (a Chromium per session, same run) = "
            f"**{shared['sessions_per_gb'] / own['sessions_per_gb']:.2f}**; PSS per session "
            f"{shared['pss_mb_per_session']} MB against {own['pss_mb_per_session']} (target <= 150)"
        )


if __name__ == "__main__":
    main()
