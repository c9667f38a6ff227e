"""Builds a small raw store with real images: EN and ZH tasks, varied actions, a JPEG step."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

from schemas.actions import Action, ActionType
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, trajectory_id_for
from trajforge.store.raw import RawStore

# No test here may reach the network (datasets / huggingface_hub look online otherwise).
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

W, H = 96, 60

ACTIONS = [
    Action.tap(0.25, 0.5, description="tap Go"),
    Action.type_text("red shoes 红鞋", 0.5, 0.1),
    Action.scroll("down"),
    Action(type=ActionType.SWIPE, x=0.9, y=0.5, x2=0.1, y2=0.5, duration_ms=300),
    Action.key("Enter"),
    Action(type=ActionType.SELECT, x=0.3, y=0.3, text="Large"),
    Action(type=ActionType.LONG_PRESS, x=0.6, y=0.6, duration_ms=800),
    Action(type=ActionType.WAIT, duration_ms=500),
    Action(type=ActionType.BACK),
    Action(type=ActionType.ANSWER, text="¥59"),
    Action(type=ActionType.DONE),
]


def screenshot(seed: int, fmt: str = "png") -> bytes:
    """A real image, different for each seed."""
    im = Image.new("RGB", (W, H), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    ImageDraw.Draw(im).rectangle((seed % 50, 5, seed % 50 + 30, 40), fill=(255, 255, 255))
    buf = io.BytesIO()
    im.save(buf, format="JPEG" if fmt == "jpeg" else "PNG")
    return buf.getvalue()


@dataclass
class Built:
    root: Path
    store: RawStore
    trajectories: dict[str, Trajectory] = field(default_factory=dict)
    steps: dict[str, list[Step]] = field(default_factory=dict)
    images: dict[tuple[str, int], bytes] = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        return sum(len(s) for s in self.steps.values())


def build_store(
    root: Path, n_traj: int = 12, collections=("web", "web/late"), batch_size: int = 3, reverse: bool = False
) -> Built:
    """n_traj trajectories spread over two collections and several parts.

    batch_size and reverse change only how the same records are committed.
    """
    store = RawStore(root)
    built = Built(root=root, store=store)
    for c, collection in enumerate(collections):
        with store.writer(collection, batch_size=batch_size) as w:
            order = range(c, n_traj, len(collections))
            for t in reversed(order) if reverse else order:
                lang = "zh" if t % 3 == 0 else "en"
                task = Task(
                    task_id=f"task-{t}",
                    language=lang,
                    app="shop" if t % 2 else "mail",
                    # One template and one wording per task: a split holds out a
                    # template and its instructions together (trajforge.publish.holdout).
                    instruction=(
                        f"把红鞋加入购物车（{30 + t} 码）"
                        if lang == "zh"
                        else f"Add red shoes to the cart (size {30 + t})"
                    ),
                    template_id=f"tpl_{t}",
                    params={"item": "red shoes", "qty": t} if t % 2 else {"to": "bob"},
                )
                # One imported-style id with dots, a slash and CJK: keys must stay safe.
                tid = "aitw/ep.7-中" if t == 7 else trajectory_id_for("test", t)
                n = 2 + t % 4
                traj = Trajectory(
                    trajectory_id=tid,
                    task=task,
                    platform="android" if t == 5 else "web",
                    app=task.app,
                    policy="random_walk" if t % 5 == 4 else "oracle",
                    device=DeviceProfile(
                        viewport_width=W, viewport_height=H, locale="zh-CN" if lang == "zh" else "en-US"
                    ),
                    outcome="success" if t % 4 else "failure",
                    verified_by="state" if t % 3 else "judge",
                    num_steps=n,
                    distractions=["coupon"] if t == 1 else [],
                    seed=t,
                )
                steps = []
                for i in range(n):
                    seed = 10 * t + i
                    fmt = "jpeg" if (t, i) == (3, 1) else "png"
                    # Two steps share one screenshot: the blob store keeps it once.
                    img = screenshot(seed if (t, i) != (2, 1) else seed - 1, fmt)
                    sha = store.blobs.put(img, fmt)
                    action = ACTIONS[(t + i) % len(ACTIONS)]
                    target = (
                        Element(role="button", name="Go 去", bbox=(0.1, 0.4, 0.4, 0.6))
                        if i % 2 == 0
                        else None
                    )
                    steps.append(
                        Step(
                            trajectory_id=tid,
                            index=i,
                            screenshot=sha,
                            image_format=fmt,
                            width=W,
                            height=H,
                            url=f"http://127.0.0.1/{task.app}/{i}",
                            a11y_tree=f'- button "Go 去" [ref=e{i}]',
                            elements=[
                                Element(role="button", name="Go 去", bbox=(0.1, 0.4, 0.4, 0.6)),
                                Element(role="heading", name="off", bbox=(0.0, 1.2, 1.0, 1.4)),
                                Element(role="generic"),
                            ],
                            action=action,
                            target=target,
                            screen_changed=i % 3 != 2,
                            error="timeout" if (t, i) == (4, 0) else None,
                            thought="I should tap Go." if i == 0 else None,
                            started_at=1000.0 + seed,
                            observe_ms=12.5,
                            act_ms=70.0,
                        )
                    )
                    built.images[(tid, i)] = img
                w.add(traj, steps)
                built.trajectories[tid] = traj
                built.steps[tid] = steps
    return built
