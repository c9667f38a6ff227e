"""The desktop section of docs/crawl-your-own-app.md, run as written.

Its `trajforge` commands are read from the page and run in order, in a folder of
their own (the page's relative paths: `examples/` is the repository's, `data/` the
default data root): a crawl of each example desktop app (mousepad, gnumeric,
pcmanfm; English and Chinese tasks), then export, validate, stats and view on the
recorded trajectories. Each crawl is a process of its own: no X server, bus or app
of its sessions may outlive it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trajforge.store.raw import RawStore

from .procs import assert_nothing_left, session_pids

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "crawl-your-own-app.md"
APPS = ("gnumeric", "pcmanfm", "mousepad")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(shutil.which(p) is None for p in ("Xvfb", *APPS)),
        reason="needs Xvfb, gnumeric, pcmanfm and mousepad (scripts/setup_desktop.sh)",
    ),
]


def desktop_commands() -> list[str]:
    """The `trajforge` lines of the page's desktop section's code blocks, in order."""
    text = DOC.read_text("utf-8")
    section = text[text.index("## 8. On desktops") :]
    nxt = re.search(r"^## ", section[3:], re.M)
    section = section[: nxt.start() + 3] if nxt else section
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", section, re.S | re.M)
    return [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip().startswith("trajforge ")]


def run(line: str, cwd: Path, env: dict) -> tuple[subprocess.CompletedProcess, int]:
    argv = [sys.executable, "-m", "trajforge.cli", *shlex.split(line)[1:]]
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=500)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), proc.pid


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("desktop-doc")
    (cwd / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if k != "TRAJFORGE_DATA"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    results = {}
    for line in desktop_commands():
        res, pid = run(line, cwd, env)
        # The crawl's sessions carry its pid: none of their processes may be left.
        assert_nothing_left(set(), {pid})
        assert res.returncode == 0, f"{line}\n{res.stderr[-3000:]}"
        results[line] = res
    return cwd, results


def test_the_section_gives_a_crawl_per_app_then_export_validate_stats_and_view():
    verbs = [shlex.split(line)[1] for line in desktop_commands()]
    assert verbs == ["crawl"] * 3 + ["export", "validate", "stats", "view"]
    assert {shlex.split(line)[2] for line in desktop_commands()[:3]} == {
        f"examples/environments/{app}.yaml" for app in APPS
    }


def test_each_app_records_verified_english_and_chinese_trajectories(ran):
    cwd, results = ran
    store = RawStore(cwd / "data" / "raw")
    for app in APPS:
        line = next(k for k in results if k.startswith(f"trajforge crawl examples/environments/{app}.yaml"))
        figures = json.loads(results[line].stdout.strip().splitlines()[-1])
        assert (figures["episodes"], figures["verified"], figures["success"]) == (2, 2, 2), figures
        trajs = list(store.iter_trajectories(f"env/{app}"))
        assert sorted(t.task.language for t in trajs) == ["en", "zh"]
        for t in trajs:
            assert (t.platform, t.outcome, t.verified_by, t.reward) == ("desktop", "success", "command", 1.0)
            assert "exited with status 0" in t.verifier_reason
            assert (t.device.name, t.device.is_mobile, t.device.viewport_width) == (
                "desktop-1024x768",
                False,
                1024,
            )
    # The Chinese folder: named by the dialog's controls, typed in Chinese, checked on disk.
    zh = next(t for t in store.iter_trajectories("env/pcmanfm") if t.task.language == "zh")
    steps = sorted(
        (s for s in store.iter_steps("env/pcmanfm") if s.trajectory_id == zh.trajectory_id),
        key=lambda s: s.index,
    )
    # (A dialog slow to open under load costs a `wait` step: not part of the demonstration.)
    steps = [s for s in steps if s.action.type.value != "wait"]
    assert [(s.action.type.value, s.target and (s.target.role, s.target.name)) for s in steps] == [
        ("key", None),
        ("tap", ("textbox", "New")),
        ("key", None),
        ("type", None),
        ("tap", ("button", "OK")),
    ]
    assert steps[3].action.text == "报告 2024" and steps[1].url == "desktop://pcmanfm/Creating New Folder"
    # The dialog's field read the Chinese name back before OK.
    assert re.search(r"textbox \[focused\] \[box=[\d,]+\]: 报告 2024", steps[4].a11y_tree)


def test_export_validate_stats_and_view_work_on_the_desktop_trajectories(ran):
    cwd, results = ran
    by_verb = {shlex.split(k)[1]: v for k, v in results.items()}
    store = RawStore(cwd / "data" / "raw")
    n = sum(1 for app in APPS for _ in store.iter_steps(f"env/{app}"))
    assert n >= 2 * (5 + 5 + 3)  # the demonstrations' steps at least
    assert f"{n} steps of 6 trajectories" in by_verb["export"].stdout, by_verb["export"].stdout
    ok = f"ok: data/shards/desktop: 1 shards, {n} samples, 6 trajectories"
    assert by_verb["validate"].stdout.startswith(ok), by_verb["validate"].stdout
    stats = by_verb["stats"].stdout
    assert f"platform desktop: 6 traj, {n} steps, 6 verified; en 3, zh 3" in stats, stats
    assert re.search(r"verified_success\s+6\s+\(command 6\)", stats), stats
    for app in APPS:
        assert re.search(rf"^\s+{app}\s+2$", stats, re.M), stats
    index = (cwd / "data" / "site" / "desktop" / "index.html").read_text("utf-8")
    assert index.count("<td>desktop</td>") == 6
    page = next(
        p
        for p in (cwd / "data" / "site" / "desktop" / "t").glob("*.html")
        if "报告 2024" in p.read_text("utf-8")
    )
    html = page.read_text("utf-8")
    assert "platform</dt><dd>desktop" in html and "command" in html
    assert "target: textbox “New”" in html and "target: button “OK”" in html
    assert "desktop://pcmanfm/Creating New Folder" in html and html.count('class="marker point a-tap"') == 2


def test_the_desktop_trajectories_make_a_grounding_set_whose_boxes_hold_their_points(ran, tmp_path):
    """The grounding set from the three apps' recorded screens: boxes from the tree's
    measured visibility, inside the image, each answer's point inside its box, English
    and Chinese expressions, no top-level window as a target."""
    from synthesis.grounding_checks import iter_records
    from synthesis.grounding_writer import write_grounding_set
    from synthesis.set_options import SetOptions

    cwd, _ = ran
    got = write_grounding_set(
        cwd / "data" / "raw", tmp_path / "g", options=SetOptions(splits=(("train", 1.0),))
    )
    summary = got["summary"]
    assert got["grounding_samples"] >= 100 and summary["box_sources"] == {
        "visibility": got["grounding_samples"]
    }
    assert set(summary["languages"]) == {"en", "zh"}
    apps, roles = set(), set()
    for _, rec, _ in iter_records(tmp_path / "g"):
        assert rec["platform"] == "desktop"
        apps.add(rec["app"])
        w, h = rec["image"]["width"], rec["image"]["height"]
        for s in rec["samples"]:
            x0, y0, x1, y1 = s["box"]
            assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h, s["id"]
            assert x0 <= s["point"][0] <= x1 and y0 <= s["point"][1] <= y1, s["id"]
            roles.add(s["element"]["role"])
    assert apps == set(APPS) and "window" not in roles and {"button", "textbox"} <= roles


def test_curation_keeps_every_verified_desktop_trajectory_and_counts_each_drop(ran, tmp_path):
    from filters.pipeline import curate
    from trajforge.store.consolidate import consolidate

    cwd, _ = ran
    store = RawStore(cwd / "data" / "raw")
    merged = consolidate(store, tmp_path / "consolidated")
    assert merged.apps == {app: 2 for app in APPS} and merged.languages == {"en": 3, "zh": 3}
    got = curate(tmp_path / "consolidated", store.blobs, tmp_path / "curated")
    assert (got.trajectories_in, got.trajectories_kept, got.steps_in) == (6, 6, merged.steps)
    assert got.steps_kept + sum(got.dropped.values()) == got.steps_in and got.steps_kept >= 6
    assert got.dropped["blank_screenshot"] == got.dropped["missing_screenshot"] == 0


def test_a_terminated_synthesis_leaves_no_desktop_session_running(tmp_path):
    """SIGTERM (a scheduler's kill, `timeout`) unwinds the command: its X server, bus
    and app go with it, and it exits with 128 + 15."""
    argv = [
        sys.executable, "-m", "trajforge.cli", "tasks", "synthesize",
        str(ROOT / "examples" / "environments" / "mousepad.yaml"), "--minutes", "5", "--data", str(tmp_path),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Terminated mid-walk: once its first session's processes are up.
        deadline = time.monotonic() + 120
        while not session_pids({proc.pid}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_pids({proc.pid}), "no desktop session started"
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-2000:]
    assert_nothing_left(set(), {proc.pid})
