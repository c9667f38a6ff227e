"""Run a template's oracle in a real browser against the real sandbox server.

Shared by the end-to-end tests of tests/sandbox: `test_all_templates.py` runs
every template once per language on a desktop, and each app's file runs a few
of its templates on small screens with pop-ups on every page.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from crawlers.guard import SafetyGuard
from sandbox.server import start_url
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import PlanOracle, TaskTemplate
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import DeviceProfile, Task

MAX_ACTIONS = 30
DESKTOP = DeviceProfile(name="desktop", viewport_width=1280, viewport_height=800)
PHONE = DeviceProfile(
    name="phone", viewport_width=390, viewport_height=844, pixel_ratio=3, is_mobile=True, locale="zh-CN"
)
PHONE_DARK = PHONE.model_copy(update={"theme": "dark", "font_scale": 1.3})
TABLET = DeviceProfile(name="tablet", viewport_width=820, viewport_height=1180, pixel_ratio=2, is_mobile=True)
GUARD = SafetyGuard()


@dataclass
class OracleRun:
    task: Task
    actions: list[Action]
    answer: str | None
    snapshot: dict  # GET /api/state/<sid>: {..., distractions, state}
    oracle: PlanOracle

    @property
    def state(self) -> dict:
        return self.snapshot["state"]

    @property
    def scrolls(self) -> int:
        return sum(a.type == ActionType.SCROLL for a in self.actions)


def solve(
    server, env, template: TaskTemplate, lang: str, seed: int, device: DeviceProfile = DESKTOP, **start
) -> OracleRun:
    """Let the oracle act until it finishes or answers; fail on a guarded or failed action.

    `start` goes to the start URL (theme, font_scale, distraction_rate).
    """
    task = template.make_task(lang, seed)
    sid = f"{task.task_id}:{device.name}:{sorted(start.items())}"
    obs = env.reset(
        start_url(server.url, sid=sid, app=template.app, lang=lang, seed=seed, **start), device=device
    )
    oracle = template.oracle(task)
    actions, answer = [], None
    for _ in range(MAX_ACTIONS):
        action = oracle.next_action(obs)
        actions.append(action)
        target = oracle.last_target
        assert target is None or not GUARD.is_sensitive(target), (task.task_id, target)
        # What the crawl runner asks before it executes an action.
        decision = GUARD.check(action, target, obs.elements)
        assert decision.allowed, (task.task_id, action, decision.reason)
        if action.type in (ActionType.DONE, ActionType.ANSWER):
            answer = action.text
            break
        obs = env.step(action)
        assert obs.last_action_error is None, (task.task_id, action, obs.last_action_error)
    else:
        pytest.fail(f"{task.task_id}: no finish within {MAX_ACTIONS} actions")
    return OracleRun(task, actions, answer, server.state(sid), oracle)


def solve_on_small_screens(server, env, cases) -> tuple[int, int]:
    """Solve each (template_id, lang, device, seed) with a pop-up on every page.

    Theme and font scale come from the device. Asserts each task is solved and
    saw pop-ups; returns (pop-ups the oracles dismissed, scroll actions) summed
    over the cases, for the caller's app-specific thresholds.
    """
    cleared = scrolled = 0
    for tid, lang, device, seed in cases:
        template = TEMPLATES[tid]
        run = solve(
            server,
            env,
            template,
            lang,
            seed,
            device=device,
            theme=device.theme,
            font_scale=device.font_scale,
            distraction_rate=1.0,
        )
        assert template.check(run.task, run.state, run.answer), (run.task.instruction, run.actions)
        assert run.snapshot["distractions"], "distraction_rate=1.0 must show pop-ups"
        cleared += run.oracle.distractions_cleared
        scrolled += run.scrolls
    return cleared, scrolled


def tap(obs: Observation, name: str, role: str) -> Action:
    """A tap on the centre of the first element named `name` with `role`."""
    return Action.tap(*obs.find(name, role)[0].centre())


def assert_pages_fit_a_phone(server, env, app: str, lang: str, paths: list[str]) -> None:
    """At 390 px and font scale 1.3 nothing may stick out sideways: the oracle only scrolls
    vertically, so a control off the right edge could never be reached."""
    env.reset(
        start_url(server.url, sid=f"{app}-fit-{lang}", app=app, lang=lang, seed=0, font_scale=1.3),
        device=PHONE,
    )
    for path in paths:
        env.page.goto(server.url + path)
        width = env.page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE.viewport_width, (lang, path, width)
