"""A hand-made raw_steps table with one planted case per filter (see PLANTED).

Trajectory ids sort in the order they are listed, which is the order the
pipeline calls "earlier". Rows are written to steps.parquet in reverse so that
the pipeline's own sort is exercised.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageDraw

from schemas.actions import Action, ActionType
from schemas.arrow import STEP_SCHEMA, TRAJECTORY_SCHEMA, step_to_row, trajectory_to_row
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory
from trajforge.store.raw import BlobStore

W, H = 64, 40
EMAIL = "alice.smith@example.com"
PHONE = "13812345678"

# Reason -> number of steps planted for it; the rest (16) are kept.
PLANTED = {
    "trajectory_length": 2,
    "task_failed": 3,
    "judge_failure": 0,
    "out_of_bounds": 1,
    "invalid_step": 0,
    "missing_screenshot": 2,
    "broken_screenshot": 1,
    "blank_screenshot": 1,
    "no_element": 1,
    "exact_duplicate": 1,
    "near_duplicate": 1,
    "no_op": 2,
    "loop": 1,
    "judge_irrelevant": 0,
}
KEPT = 16


def picture(seed: int, tweak: bool = False, fmt: str = "PNG") -> bytes:
    """A distinct, structured image per seed; `tweak` moves a few pixels (a near-duplicate)."""
    im = Image.new("RGB", (W, H), (250, 250, 250))
    d = ImageDraw.Draw(im)
    for k in range(4):
        v = (seed * 7 + k * 13) % 11
        d.rectangle(
            (4 + v * 3, 3 + k * 9, 20 + v * 3, 8 + k * 9),
            fill=((seed * 40 + k * 60) % 200, (seed * 90) % 200, (k * 70) % 200),
        )
    if tweak:
        d.point([(W - 1, H - 1), (W - 2, H - 1)], fill=(240, 240, 240))
    buf = io.BytesIO()
    im.save(buf, format=fmt)
    return buf.getvalue()


def blank() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (W, H), (255, 255, 255)).save(buf, format="PNG")
    return buf.getvalue()


@dataclass
class Raw:
    dir: Path  # raw_steps dir
    blobs: BlobStore
    trajectories: dict[str, Trajectory] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    images: dict[tuple[str, int], bytes] = field(default_factory=dict)


def _traj(
    tid: str, n: int, outcome="success", verified_by="state", instruction="Open the page"
) -> Trajectory:
    task = Task(task_id=f"task-{tid}", instruction=instruction, language="en", app="shop")
    return Trajectory(
        trajectory_id=tid,
        task=task,
        platform="web",
        app="shop",
        policy="oracle",
        device=DeviceProfile(viewport_width=W, viewport_height=H),
        outcome=outcome,
        verified_by=verified_by,
        num_steps=n,
    )


def build_raw(root: Path) -> Raw:
    blobs = BlobStore(root / "blobs")
    raw = Raw(dir=root / "raw_steps", blobs=blobs)

    def step(tid, i, image: bytes | None, action: Action, url=None, tree=None, **kw) -> dict:
        sha = blobs.put(image) if image is not None else kw.pop("sha", "")
        if image is not None:
            raw.images[(tid, i)] = image
        s = Step(
            trajectory_id=tid,
            index=i,
            screenshot=sha,
            width=W,
            height=H,
            url=url or f"http://shop/{tid}/{i}",
            a11y_tree=tree or f'- heading "{tid} step {i}"',
            action=action,
            **kw,
        )
        row = step_to_row(s)
        raw.rows.append(row)
        return row

    tap = Action.tap
    done = Action(type=ActionType.DONE)

    # t00: a failed run, first in order: its home-screen step must not make t01's a duplicate.
    t = "t00_failed"
    raw.trajectories[t] = _traj(t, 3, outcome="failure")
    step(t, 0, picture(1), tap(0.2, 0.2), url="http://shop/home", tree='- heading "Home"')
    step(t, 1, picture(2), tap(0.3, 0.3))
    step(t, 2, picture(3), done)

    # t01: clean; step 1 shows an email in a boxed element (blurred), the task has a phone.
    t = "t01_good"
    raw.trajectories[t] = _traj(t, 4, instruction=f"Call {PHONE} about the order")
    step(t, 0, picture(1), tap(0.2, 0.2), url="http://shop/home", tree='- heading "Home"')
    step(
        t,
        1,
        picture(4),
        Action.scroll("down"),
        url="http://shop/account",
        tree=f'- text "Email {EMAIL}"',
        elements=[Element(role="text", name=f"Email {EMAIL}", bbox=(0.1, 0.1, 0.7, 0.4))],
    )
    step(t, 2, picture(5), Action.type_text("hello"), url="http://shop/form", tree='- textbox "Message"')
    step(t, 3, picture(6), done)

    # t02: an exact duplicate of t01#0, a near duplicate of t01#2, and t01#0's screen
    # with another action (not a duplicate).
    t = "t02_dups"
    raw.trajectories[t] = _traj(t, 4)
    step(t, 0, picture(1), tap(0.2, 0.2), url="http://shop/home", tree='- heading "Home"')
    # the same screen (same tree) with a few pixels changed: a near duplicate
    step(
        t,
        1,
        picture(5, tweak=True),
        Action.type_text("hello"),
        url="http://shop/form",
        tree='- textbox "Message"',
    )
    step(t, 2, picture(1), tap(0.6, 0.6), url="http://shop/home", tree='- heading "Home"')
    step(t, 3, picture(7), done)

    # t03: a tap after which nothing changed (seen in the next step), and one the
    # crawler recorded as unchanged.
    t = "t03_noop"
    raw.trajectories[t] = _traj(t, 4)
    same_tree = '- button "Buy"'
    step(t, 0, picture(8), tap(0.2, 0.2), url="http://shop/p", tree=same_tree)
    step(t, 1, picture(8), tap(0.5, 0.5), url="http://shop/p", tree=same_tree, screen_changed=False)
    step(t, 2, picture(9), tap(0.4, 0.4))
    step(t, 3, picture(10), done)

    # t04: state A visited at steps 0, 2 and 4: the third visit is a loop.
    t = "t04_loop"
    raw.trajectories[t] = _traj(t, 6)
    a = dict(url="http://shop/list", tree='- list "Items"')
    step(t, 0, picture(11), tap(0.1, 0.1), **a)
    step(t, 1, picture(12), tap(0.2, 0.1))
    step(t, 2, picture(11), tap(0.3, 0.1), **a)
    step(t, 3, picture(13), tap(0.4, 0.1))
    step(t, 4, picture(11), tap(0.5, 0.1), **a)
    step(t, 5, picture(14), done)

    # t05: a tap outside the screen (a raw row the schema would refuse) and one on no element.
    t = "t05_bounds"
    raw.trajectories[t] = _traj(t, 4)
    boxed = [Element(role="button", name="OK", bbox=(0.4, 0.4, 0.6, 0.6))]
    row = step(t, 0, picture(15), tap(0.5, 0.5))
    row["action"]["x"] = 1.3
    step(t, 1, picture(16), tap(0.9, 0.9), elements=boxed)
    step(t, 2, picture(17), tap(0.5, 0.5), elements=boxed)
    step(t, 3, picture(18), done)

    # t06: blank, missing blob, undecodable bytes, no screenshot at all, then a good one.
    t = "t06_images"
    raw.trajectories[t] = _traj(t, 5)
    step(t, 0, blank(), tap(0.5, 0.5))
    step(t, 1, None, tap(0.5, 0.5), sha=hashlib.sha256(b"never stored").hexdigest())
    step(t, 2, picture(19)[:120], tap(0.5, 0.5))  # a truncated PNG
    step(t, 3, None, tap(0.5, 0.5))
    step(t, 4, picture(20), done)

    # t07: too short.
    t = "t07_short"
    raw.trajectories[t] = _traj(t, 2)
    step(t, 0, picture(21), tap(0.5, 0.5))
    step(t, 1, picture(22), done)

    raw.dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(raw.rows[::-1], schema=STEP_SCHEMA), raw.dir / "steps.parquet")
    pq.write_table(
        pa.Table.from_pylist(
            [trajectory_to_row(t) for t in raw.trajectories.values()], schema=TRAJECTORY_SCHEMA
        ),
        raw.dir / "trajectories.parquet",
    )
    return raw


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Raw:
    return build_raw(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="module")
def curated(raw, tmp_path_factory):
    from filters.pipeline import curate

    out = tmp_path_factory.mktemp("curated")
    return curate(raw.dir, raw.blobs, out)
