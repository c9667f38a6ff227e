"""A small curated store for the grounding tests: hand-measured visibility (until real
crawls carry it), EN and ZH screens, a near-duplicate screen, an acted-on button whose
next screen shows a dialog, and elements that must not become targets."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

from schemas.actions import Action, ActionType
from schemas.records import DeviceProfile, Element, Step, Task, Trajectory, Visibility
from trajforge.store.raw import RawStore

W, H = 320, 200
SEEN = Visibility(
    on_screen=True, visible_fraction=1.0, hit_fraction=1.0, centre_hit=True, modal_covered=False
)
COVERED = Visibility(
    on_screen=True, visible_fraction=1.0, hit_fraction=0.2, centre_hit=False, modal_covered=True
)
OFF = Visibility(
    on_screen=False, visible_fraction=0.0, hit_fraction=0.0, centre_hit=False, modal_covered=False
)


def el(role, name, box, vis=SEEN) -> Element:
    return Element(role=role, name=name, bbox=box, visibility=vis)


def inbox(lang: str) -> list[Element]:
    zh = lang == "zh"
    return [
        el("searchbox", "搜索" if zh else "Search", (0.30, 0.05, 0.70, 0.15)),
        el("button", "搜" if zh else "Go", (0.72, 0.05, 0.80, 0.15)),
        el("img", "菜单" if zh else "Menu", (0.02, 0.06, 0.06, 0.12)),  # small: 13x12 px
        el("button", "写邮件" if zh else "Compose", (0.02, 0.25, 0.22, 0.35)),
        el("listitem", "周报" if zh else "Weekly report", (0.30, 0.30, 0.95, 0.40)),
        el("listitem", "账单" if zh else "Invoice", (0.30, 0.42, 0.95, 0.52)),
        el("listitem", "会议" if zh else "Meeting", (0.30, 0.54, 0.95, 0.64)),
        el("link", "设置" if zh else "Settings", (0.02, 0.80, 0.20, 0.88)),
        el("link", "帮助" if zh else "Help", (0.02, 0.90, 0.20, 0.98), COVERED),
        el("button", "更多" if zh else "More", (0.30, 1.10, 0.50, 1.20), OFF),
        el("generic", "", (0.0, 0.0, 1.0, 1.0)),
        Element(role="button", name="Old", bbox=(0.5, 0.7, 0.6, 0.8)),  # never measured
    ]


def dialog(lang: str) -> list[Element]:
    zh = lang == "zh"
    return inbox(lang)[:3] + [
        el("dialog", "写邮件" if zh else "New message", (0.2, 0.2, 0.8, 0.9)),
        el("textbox", "收件人" if zh else "To", (0.25, 0.3, 0.75, 0.4)),
        el("button", "发送" if zh else "Send", (0.6, 0.8, 0.75, 0.88)),
    ]


def tree(elements: list[Element]) -> str:
    return "\n".join(f'- {e.role} "{e.name}"' for e in elements)


def png(seed: int) -> bytes:
    im = Image.new("RGB", (W, H), (250, 250, 250))
    ImageDraw.Draw(im).rectangle((seed * 7 % 200, 20, seed * 7 % 200 + 60, 80), fill=(30, 90, 200))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


@dataclass
class Built:
    store: RawStore
    trajectories: dict
    steps: dict


def build_grounding_store(
    root: Path, per_language: int = 2, collection: str = "curated", languages=("en", "zh")
) -> Built:
    """`per_language` trajectories per language of 3 steps: inbox (tap Compose), the
    compose dialog, the inbox again (a near-duplicate of step 0: same tree)."""
    store = RawStore(root)
    trajs, steps = {}, {}
    with store.writer(collection) as w:
        for lang in languages:
            for t in range(per_language):
                tid = f"g{lang}{t}"
                task = Task(
                    task_id=f"mail-{lang}-{t}",
                    instruction=f"write mail {t}",
                    language=lang,
                    app="mail",
                    template_id=f"mail_compose_{t}",
                )
                traj = Trajectory(
                    trajectory_id=tid,
                    task=task,
                    platform="web",
                    app="mail",
                    device=DeviceProfile(viewport_width=W, viewport_height=H),
                    policy="oracle",
                    num_steps=3,
                    outcome="success",
                    verified_by="state",
                )
                screens = [inbox(lang), dialog(lang), inbox(lang)]
                compose = screens[0][3]
                rows = []
                for i, els in enumerate(screens):
                    sha = store.blobs.put(png(t * 3 + i + (10 if lang == "zh" else 0)), "png")
                    act = (
                        Action(type=ActionType.TAP, x=0.12, y=0.30)
                        if i == 0
                        else Action(type=ActionType.WAIT, duration_ms=500)
                    )
                    rows.append(
                        Step(
                            trajectory_id=tid,
                            index=i,
                            screenshot=sha,
                            width=W,
                            height=H,
                            url=f"http://127.0.0.1/mail/{'compose' if i == 1 else 'inbox'}",
                            a11y_tree=tree(els),
                            elements=els,
                            action=act,
                            target=compose if i == 0 else None,
                            screen_changed=True,
                        )
                    )
                w.add(traj, rows)
                trajs[tid], steps[tid] = traj, rows
    return Built(store, trajs, steps)
