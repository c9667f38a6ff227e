"""The demo: materialise the whole graph through `dagster asset materialize`.

Four CLI runs, because a run's assets must share one partitions definition:
the catalog (unpartitioned), the web crawl of every app partition in one run,
the mobile crawl of every app x device partition in one run (both with
single-run backfill policies; the mobile one drives phones through a real
Appium server), then the import of the public-dataset samples dropped in the
inbox, consolidation, curation and export, then the synthesis: thoughts for
every kept step (the template backend unless a VLM is configured), the
reasoning set and the Chinese GUI set as shards, and task difficulty. Prints the wall
time, trajectories and steps per minute, peak memory of the process tree, and
`trajforge stats` of the shards; writes them to data/reports/demo.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"
sys.path.insert(0, str(ROOT))
from dagster_project.partitions import ALL_MOBILE_RANGE, ALL_WEB_APPS_RANGE  # noqa: E402

SAMPLES = ROOT / "tests" / "importers" / "samples"
# format -> the sample folder (real records of each public dataset, with its
# PROVENANCE.md) that the demo drops in inbox/<format>/ to be imported
DEMO_IMPORTS = {
    "aitz": "aitz",
    "android_control": "android_control",
    "gui_odyssey": "gui_odyssey",
    "mind2web": "mind2web_and_multimodal_mind2web",
    "guiact": "guiact",
    "agentnet": "opencua_agentnet",
    "os_genesis": "os_genesis",
    "autoglm": "open_autoglm",
    "android_world": "android_world",
}
PER_TEMPLATE = int(os.environ.get("TRAJFORGE_DEMO_PER_TEMPLATE", "2"))
DATASET = "sandbox"


class PeakMemory:
    """Samples the summed RSS of a process and all its descendants."""

    def __init__(self, interval: float = 0.25):
        self.peak = 0
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def materialize(args: list[str], env: dict) -> float:
    cmd = [str(VENV_BIN / "dagster"), "asset", "materialize", "-m", "dagster_project.definitions", *args]
    print(f"\n$ {' '.join(cmd[1:])}", flush=True)
    t0 = time.time()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return time.time() - t0


def seed_inbox(inbox: Path) -> int:
    """Drop the bundled public-dataset samples in the inbox, as a user would."""
    n = 0
    for fmt, folder in DEMO_IMPORTS.items():
        # copytree keeps mtimes, so an unchanged sample leaves the sensor's cursor alone
        shutil.copytree(SAMPLES / folder, inbox / fmt / folder, dirs_exist_ok=True)
        n += sum(1 for p in (SAMPLES / folder).rglob("*") if p.is_file())
    return n


def reflection_summary(data: Path) -> dict:
    import pyarrow.parquet as pq

    path = data / "raw" / "reflection" / "sandbox" / "reflection.parquet"
    rows = pq.read_table(path).to_pylist() if path.exists() else []
    corrections: dict[str, int] = {}
    for r in rows:
        corrections[r["correction"]] = corrections.get(r["correction"], 0) + 1
    return {
        "trajectories": len(rows),
        "led_to_success": sum(r["led_to_success"] for r in rows),
        "corrections": dict(sorted(corrections.items())),
    }


def main() -> None:
    env = dict(os.environ)
    data = Path(env.setdefault("TRAJFORGE_DATA", str(ROOT / "data"))).resolve()
    env["TRAJFORGE_DATA"] = str(data)
    home = Path(env.setdefault("DAGSTER_HOME", str(ROOT / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    # No model weights can be downloaded: without TRAJFORGE_TRAIN_MODEL the training assets
    # train the tiny offline model, which proves the loop, not the quality.
    env.setdefault("TRAJFORGE_TRAIN_MODE", "tiny")
    catalog_cfg = json.dumps({"ops": {"task_catalog": {"config": {"per_template": PER_TEMPLATE}}}})

    seeded = seed_inbox(data / "inbox")
    print(f"inbox: {seeded} sample files of public datasets ready to import")
    t0 = time.time()
    with PeakMemory() as mem:
        timings = {
            "task_catalog": materialize(["--select", "task_catalog", "--config-json", catalog_cfg], env),
            "web_trajectories": materialize(
                ["--select", "web_trajectories", "--partition-range", ALL_WEB_APPS_RANGE], env
            ),
            "mobile_trajectories": materialize(
                ["--select", "mobile_trajectories", "--partition-range", ALL_MOBILE_RANGE], env
            ),
            "import+reflect+curate+export": materialize(
                [
                    "--select",
                    "imported_trajectories,reflection_trajectories,raw_steps,curated_steps,web_shards",
                ],
                env,
            ),
            "synthesis": materialize(
                ["--select", "cot_steps,reasoning_set,chinese_gui_set,grounding_set,task_difficulty"], env
            ),
            "training": materialize(["--select", "sft_checkpoint,rl_checkpoint,online_eval"], env),
        }
    wall = time.time() - t0

    shards = data / "shards" / DATASET
    out = subprocess.run(
        [str(VENV_BIN / "trajforge"), "stats", str(shards), "--json"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    stats = json.loads(out)
    crawl_min = (timings["web_trajectories"] + timings["mobile_trajectories"]) / 60
    curated = json.loads((data / "curated" / "summary.json").read_text())
    sets = {}
    for name in ("reasoning_set", "chinese_gui"):
        out = subprocess.run(
            [str(VENV_BIN / "trajforge"), "stats", str(data / "shards" / name), "--json"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        st = json.loads(out)
        sets[name] = {
            k: st[k]
            for k in (
                "samples",
                "steps",
                "trajectories",
                "modes",
                "languages",
                "thought_backends",
                "skipped_steps",
                "skipped_trajectories",
            )
        }
    # Grounding: samples per unique screen signature, the languages, drops and balance.
    out = subprocess.run(
        [str(VENV_BIN / "trajforge"), "stats", str(data / "shards" / "grounding_set"), "--json"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    g = json.loads(out)
    grounding = {
        k: g[k]
        for k in (
            "samples",
            "records",
            "unique_screens",
            "samples_per_unique_screen",
            "languages",
            "kinds",
            "size_buckets",
        )
    }
    grounding.update({k: g["summary"][k] for k in ("dropped", "dedup_rate", "balance")})
    report = {
        "grounding": grounding,
        "wall_s": round(wall, 1),
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "peak_rss_mb": round(mem.peak / 2**20),
        "trajectories": stats["trajectories"],
        "steps": stats["steps"],
        "trajectories_per_min_crawl": round(stats["trajectories"] / crawl_min, 1),
        "steps_per_min_crawl": round(stats["steps"] / crawl_min, 1),
        "mobile": stats.get("by_platform", {}).get("mobile_web", {}),
        "mobile_crawl_s": round(timings["mobile_trajectories"], 1),
        "curated": {
            k: curated.get(k)
            for k in ("steps_in", "steps_kept", "dropped", "trajectories_in", "trajectories_kept", "pii")
        },
        "sets": sets,
        "reflection": reflection_summary(data),
        "training": {
            n: json.loads((data / "training" / f"{n}.json").read_text())
            for n in ("sft_checkpoint", "rl_checkpoint", "online_eval")
        },
        "stats": stats,
    }
    (data / "reports").mkdir(parents=True, exist_ok=True)
    (data / "reports" / "demo.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print("\n== trajforge stats", shards)
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    print(
        f"\n== demo: {wall:.0f} s wall, peak memory {report['peak_rss_mb']} MB, "
        f"{report['trajectories_per_min_crawl']} trajectories/min and "
        f"{report['steps_per_min_crawl']} steps/min while crawling"
    )
    c = report["curated"]
    print(
        f"== curated: {c['steps_in']} steps in = {c['steps_kept']} kept + "
        f"{sum(c['dropped'].values())} dropped {c['dropped']}; personal data scrubbed {c['pii']}"
    )
    for name, st in sets.items():
        print(
            f"== {name}: {st['samples']} samples ({st['steps']} steps), modes {st['modes']}, "
            f"languages {st['languages']}, thoughts by {st['thought_backends']}"
        )
    print(
        f"== grounding_set: {grounding['samples']} samples on {grounding['unique_screens']} unique "
        f"screens ({grounding['samples_per_unique_screen']:.1f} per screen), languages "
        f"{grounding['languages']}, sizes {grounding['size_buckets']}"
    )
    r = report["reflection"]
    print(
        f"== reflection: {r['trajectories']} episodes with a real wrong step, "
        f"{r['led_to_success']} recovered to a verified success, corrections {r['corrections']}"
    )
    mobile = report["mobile"]
    if mobile:
        print(
            f"== mobile (Appium): {mobile['trajectories']} trajectories, {mobile['steps']} steps, "
            f"languages {mobile['languages']}, {mobile['verified_success']} verified by state; "
            f"swipe {mobile['action_types'].get('swipe', 0)}, "
            f"long_press {mobile['action_types'].get('long_press', 0)}"
        )


if __name__ == "__main__":
    main()
