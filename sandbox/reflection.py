"""Reflection augmentation: a real wrong step in the sandbox, its reflection, its correction.

`ReflectionPolicy` follows the task's oracle, but at step `wrong_at` (or the
first tap after it) it taps a plausible wrong control instead: a visible,
enabled control of the same role as the oracle's target (or a control near
it), chosen with the seed among the nearest ones, never one the safety guard
would block and never one whose effect cannot be undone (delete, send...).
The step after it carries `<reflection>…</reflection>` as its thought: what
the screen shows now, why that is off the task's path and how to get back on
it, and that step's action is the correction:

- back:   the wrong tap opened another page: browser back;
- undo:   it flipped a switch/checkbox in place: tap it again;
- replan: nothing to undo: the oracle goes on from the live screen.

Then the oracle continues. The reflection's words come from the caller's
`write_reflection` (synthesis.reflection_text.reflection: pure text from the
live observation), so this episode runner stays on the collection side.
`reflect_tasks` plays tasks with this policy through `sandbox.episode.run_episode`,
so the outcome is verified from the sandbox state as in any crawl; trajectories are stored with source_name
"sandbox:reflection" and policy "oracle" (the schema's Policy literal has no
"reflection"; the wrong step is in the sidecar), and a sidecar table
`reflection.parquet` in the collection's folder lists per trajectory the wrong
step, the reflection, the correction and `led_to_success`. A task where no
wrong action can be found is counted in `skipped` with the reason and not
stored: no reflection is ever faked.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa

from crawlers.env_source import close_episode_quietly, open_env_source
from crawlers.episode import CrawlEnv, EpisodeContext
from crawlers.guard import SafetyGuard
from crawlers.web_env import BrowserCrashed
from sandbox import reflection_words as say
from sandbox.crawl import draw_task_device
from sandbox.distractions import DISMISS_NAMES
from sandbox.environment import sandbox_environment
from sandbox.episode import SandboxRun
from sandbox.oracle_policy import OraclePolicy
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import VISIBLE_MAX, VISIBLE_MIN, TaskTemplate
from schemas.a11y import parse_snapshot
from schemas.actions import Action, ActionType
from schemas.observation import Observation
from schemas.records import Element, Task, Trajectory, trajectory_id_for
from schemas.screen_signature import screen_signature
from trajforge.store.raw import RawStore, atomic_write_table

# Writes the text inside <reflection> from the screen the wrong step produced:
# synthesis.reflection_text.reflection (pure text; collection does not import it).
ReflectionWriter = Callable[..., str]

SOURCE_NAME = "sandbox:reflection"
CLICKABLE = ("link", "button", "tab", "menuitem", "option", "checkbox", "switch", "radio")
TOGGLES = ("switch", "checkbox")
NEAR = 0.1  # a control of another role is "near" when its box is this close
NEAREST_K = 3  # the wrong control is drawn among this many nearest candidates


@dataclass(frozen=True)
class WrongStep:
    index: int
    action: Action
    target: Element  # what was tapped
    intended: Element  # what the oracle would have tapped
    intended_action: Action
    url: str  # the screen it was taken on
    signature: str


@dataclass
class Correction:
    kind: str  # back | undo | replan
    steps: list[int] = field(default_factory=list)
    recovered: bool | None = None  # back/undo: the screen before the wrong step came back


def _disabled(tree: str) -> set[tuple[str, str]]:
    return {(n.role, n.name) for n in parse_snapshot(tree) if "disabled" in n.attrs}


def _checked(tree: str, role: str, name: str) -> bool | None:
    for n in parse_snapshot(tree):
        if n.role == role and n.name == name:
            return "checked" in n.attrs and n.attrs["checked"] != "false"
    return None


def _screen_key(tree: str) -> str:
    # Keyboard focus ([active]) moves with every tap: it does not make another screen.
    return screen_signature(tree.replace(" [active]", ""))


def _distance(a: Element, b: Element) -> float:
    (ax, ay), (bx, by) = a.centre(), b.centre()
    return ((ax - bx) ** 2 + (ay - by) ** 2) ** 0.5


def _gap(a: Element, b: Element) -> float:
    """The distance between two boxes (0 when they touch): wide rows are near their neighbours."""
    dx = max(0.0, b.bbox[0] - a.bbox[2], a.bbox[0] - b.bbox[2])
    dy = max(0.0, b.bbox[1] - a.bbox[3], a.bbox[1] - b.bbox[3])
    return (dx**2 + dy**2) ** 0.5


def wrong_candidates(obs: Observation, intended: Element, guard: SafetyGuard | None = None) -> list[Element]:
    """Controls a plausible wrong tap could hit instead of `intended`, nearest first.

    Same role as `intended` when there are any, else clickable controls within
    NEAR of it; visible, not disabled, not `intended` (nor one of the same
    name), not a pop-up's dismiss control, not guarded, not irreversible.
    """
    guard = guard or SafetyGuard()
    disabled = _disabled(obs.a11y_tree)
    usable = []
    for e in obs.elements:
        if e.role not in CLICKABLE or e.bbox is None or not e.name.strip():
            continue
        x0, y0, x1, y1 = e.bbox
        cx, cy = e.centre()
        if x1 <= x0 or y1 <= y0 or not (VISIBLE_MIN <= cy <= VISIBLE_MAX and 0.0 <= cx <= 1.0):
            continue
        if e.name.strip() == intended.name.strip() or e.bbox == intended.bbox:
            continue
        if (e.role, e.name) in disabled or e.name.strip() in DISMISS_NAMES:
            continue
        if say.is_irreversible(e.name):
            continue
        if not guard.check(Action.tap(cx, cy), e, obs.elements).allowed:
            continue
        usable.append(e)
    same = [e for e in usable if e.role == intended.role]
    pool = same or [e for e in usable if _gap(e, intended) <= NEAR]
    return sorted(pool, key=lambda e: (_gap(e, intended), _distance(e, intended)))


class ReflectionPolicy:
    """The oracle with one real wrong step, its reflection and its correction."""

    name = "oracle"  # the runner stores policy.name; see the module docstring

    def __init__(
        self,
        template: TaskTemplate,
        task: Task,
        *,
        wrong_at: int,
        seed: int,
        write_reflection: ReflectionWriter,
        language: str | None = None,
        guard: SafetyGuard | None = None,
    ):
        if wrong_at < 0:
            raise ValueError(f"wrong_at={wrong_at} must be >= 0")
        self.write_reflection = write_reflection
        self.delegate = OraclePolicy(template, task)
        self.task = task
        self.wrong_at = wrong_at
        self.language = language or task.language
        self.guard = guard or SafetyGuard()
        self.rng = random.Random(f"reflection:{seed}:{task.task_id}:{wrong_at}")
        self.calls = 0
        self.phase = "before"  # before -> reflect -> correcting -> after
        self.last_target: Element | None = None
        self.last_thought: str | None = None
        self.wrong_step: WrongStep | None = None
        self.reflection_text: str | None = None
        self.reflection_step: int | None = None
        self.corrected: Correction | None = None
        self.skip_reason: str | None = None
        self.before_checked: bool | None = None  # the wrong toggle's state before the tap

    def act(self, obs: Observation) -> Action:
        index, self.calls = self.calls, self.calls + 1
        self.last_target = self.last_thought = None
        if self.phase == "before" and index >= self.wrong_at:
            return self._maybe_wrong(obs, index)
        if self.phase == "reflect":
            return self._reflect(obs, index)
        if self.phase == "correcting":
            w = self.wrong_step
            self.corrected.recovered = obs.url == w.url and _screen_key(obs.a11y_tree) == w.signature
            self.phase = "after"
        return self._oracle(obs)

    def _oracle(self, obs: Observation) -> Action:
        action = self.delegate.act(obs)
        self.last_target = self.delegate.last_target
        return action

    def _maybe_wrong(self, obs: Observation, index: int) -> Action:
        # Ask a copy of the oracle what it would do; only a tap on a target
        # (not a pop-up's dismiss) can be swapped for a wrong tap.
        probe = copy.deepcopy(self.delegate.oracle)
        cleared = probe.distractions_cleared
        intended_action = probe.next_action(obs)
        intended = probe.last_target
        if intended_action.type != ActionType.TAP or intended is None or probe.distractions_cleared > cleared:
            self.delegate.oracle = probe  # an ordinary step: the wrong one comes later
            self.last_target = intended
            return intended_action
        pool = wrong_candidates(obs, intended, self.guard)[:NEAREST_K]
        if not pool:
            self.skip_reason = (
                f"step {index}: no visible, enabled, unguarded control to tap "
                f"instead of {intended.role} '{intended.name}'"
            )
            self.phase = "after"
            self.delegate.oracle = probe
            self.last_target = intended
            return intended_action
        wrong = self.rng.choice(pool)
        cx, cy = wrong.centre()
        action = Action.tap(
            min(max(cx, 0.0), 1.0),
            min(max(cy, 0.0), 1.0),
            description=say.tap_description(wrong.role, wrong.name, self.language),
        )
        self.wrong_step = WrongStep(
            index=index,
            action=action,
            target=wrong,
            intended=intended,
            intended_action=intended_action,
            url=obs.url,
            signature=_screen_key(obs.a11y_tree),
        )
        self.before_checked = _checked(obs.a11y_tree, wrong.role, wrong.name)
        self.phase = "reflect"
        self.last_target = wrong
        return action

    def _reflect(self, obs: Observation, index: int) -> Action:
        w = self.wrong_step
        changed = _screen_key(obs.a11y_tree) != w.signature
        checked = _checked(obs.a11y_tree, w.target.role, w.target.name)
        again = self._same_control(obs, w.target)
        if obs.url != w.url:
            kind = "back"
            action = Action(type=ActionType.BACK, description=say.back_description(self.language))
        elif (
            w.target.role in TOGGLES
            and again is not None
            and checked is not None
            and checked != self.before_checked
        ):
            kind = "undo"
            cx, cy = again.centre()
            action = Action.tap(
                min(max(cx, 0.0), 1.0),
                min(max(cy, 0.0), 1.0),
                description=say.undo_description(again.role, again.name, self.language),
            )
            self.last_target = again
        else:
            kind = "replan"
            action = self._oracle(obs)
        text = self.write_reflection(
            kind,
            lang=self.language,
            wrong_role=w.target.role,
            wrong_name=w.target.name,
            intended_name=w.intended.name,
            obs=obs,
            screen_changed=changed,
            checked=checked,
            next_description=action.description if kind == "replan" else None,
        )
        self.reflection_text, self.reflection_step = text, index
        self.last_thought = f"<reflection>{text}</reflection>"
        self.corrected = Correction(kind=kind, steps=[index])
        self.phase = "after" if kind == "replan" else "correcting"
        return action

    @staticmethod
    def _same_control(obs: Observation, el: Element) -> Element | None:
        same = [e for e in obs.elements if e.role == el.role and e.name == el.name and e.bbox]
        return min(same, key=lambda e: _distance(e, el)) if same else None

    def record(self, traj: Trajectory) -> dict:
        """The sidecar row of a finished episode (needs a wrong step and its reflection)."""
        w, c = self.wrong_step, self.corrected

        def dump(m):
            return json.dumps(
                m.model_dump(mode="json", exclude_none=True), ensure_ascii=False, sort_keys=True
            )

        return {
            "trajectory_id": traj.trajectory_id,
            "task_id": self.task.task_id,
            "language": self.language,
            "wrong_step": w.index,
            "wrong_action": dump(w.action),
            "wrong_target": dump(w.target),
            "intended_target": dump(w.intended),
            "reflection_step": self.reflection_step,
            "reflection": self.reflection_text,
            "correction": c.kind,
            "correction_steps": list(c.steps),
            "recovered": c.recovered,
            "outcome": traj.outcome,
            "led_to_success": traj.outcome == "success",
        }


# -- running tasks -------------------------------------------------------------------
SIDECAR_SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.string()),
        ("task_id", pa.string()),
        ("language", pa.string()),
        ("wrong_step", pa.int32()),
        ("wrong_action", pa.string()),
        ("wrong_target", pa.string()),
        ("intended_target", pa.string()),
        ("reflection_step", pa.int32()),
        ("reflection", pa.string()),
        ("correction", pa.string()),
        ("correction_steps", pa.list_(pa.int32())),
        ("recovered", pa.bool_()),
        ("outcome", pa.string()),
        ("led_to_success", pa.bool_()),
    ]
)


@dataclass
class ReflectionResult:
    trajectories: int = 0  # written by this call
    existing: int = 0  # already stored: not played again
    success: int = 0  # led_to_success among those written
    failure: int = 0  # any other verified outcome
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (task_id, why): no wrong step
    errors: list[tuple[str, str]] = field(default_factory=list)  # (task_id, error)
    rows: list[dict] = field(default_factory=list)  # sidecar rows written now
    sidecar: Path | None = None
    seconds: float = 0.0


def sidecar_paths(store: RawStore, collection: str) -> tuple[Path, Path]:
    folder = store.root / collection
    return folder / "reflection.jsonl", folder / "reflection.parquet"


@dataclass(frozen=True)
class Reflections:
    """How reflection episodes are played in the sandbox at `server_url`.

    `wrong_at`: the first step at which the wrong tap may come; `templates`
    (default: every sandbox template) give each task its oracle; `devices`
    narrows the device profiles; `guard` replaces the default SafetyGuard.
    """

    server_url: str
    collection: str = "reflection/sandbox"
    seed: int = 0
    wrong_at: int = 0
    distraction_rate: float = 0.0
    max_steps: int = 30
    devices: list[str] | None = None
    templates: dict[str, TaskTemplate] | None = None
    guard: SafetyGuard | None = None


def reflect_tasks(
    tasks: Iterable[Task],
    write_reflection: ReflectionWriter,
    how: Reflections,
    *,
    store: RawStore,
    env: CrawlEnv | None = None,
) -> ReflectionResult:
    """Play each task with a ReflectionPolicy; store the verified trajectories and the sidecar.

    Trajectory ids are trajectory_id_for("reflection", task_id, seed): a re-run
    skips what is stored. `write_reflection`: the reflection's text
    (synthesis.reflection_text.reflection). `env` (a WebEnv) is used as is; without it one
    headless Chromium allowed to reach only the sandbox runs the call.
    """
    server_url, collection, seed = how.server_url, how.collection, how.seed
    templates = TEMPLATES if how.templates is None else how.templates
    guard = how.guard or SafetyGuard()
    result = ReflectionResult()
    started = time.perf_counter()
    jsonl, _ = sidecar_paths(store, collection)
    audit = store.audit_log(collection)
    run = SandboxRun(
        server_url=server_url,
        store=store,
        guard=guard,
        max_steps=how.max_steps,
        audit=audit,
        distraction_rate=how.distraction_rate,
        devices=how.devices,
    )
    try:
        with (
            open_env_source(sandbox_environment(server_url), env=env) as source,
            store.writer(collection) as writer,
        ):
            for task in tasks:
                tid = trajectory_id_for("reflection", task.task_id, seed)
                if writer.has(tid):
                    result.existing += 1
                    continue
                template = templates.get(task.template_id) if task.template_id else None
                if template is None:
                    raise ValueError(
                        f"task {task.task_id}: reflection needs the template of "
                        f"its oracle, got template_id={task.template_id!r}"
                    )
                policy = ReflectionPolicy(
                    template,
                    task,
                    wrong_at=how.wrong_at,
                    seed=seed,
                    write_reflection=write_reflection,
                    language=task.language,
                    guard=guard,
                )
                with source.lease() as live:
                    played = _play(live, task, template, policy, run.episode(tid, seed, None), run, result)
                if played is None:
                    continue
                traj, steps, row = played
                # The row goes first: a crash before the commit leaves a row
                # that the rebuild below ignores, never a commit without a row.
                jsonl.parent.mkdir(parents=True, exist_ok=True)
                with open(jsonl, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
                writer.add(traj, steps)
                result.trajectories += 1
                result.rows.append(row)
                if row["led_to_success"]:
                    result.success += 1
                else:
                    result.failure += 1
    finally:
        audit.close()
    result.sidecar = write_sidecar(store, collection)
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def _play(
    env: CrawlEnv,
    task: Task,
    template: TaskTemplate,
    policy: ReflectionPolicy,
    ctx: EpisodeContext,
    run: SandboxRun,
    result: ReflectionResult,
):
    """One episode; None (counted in `result`) when it has no wrong step or failed to run."""
    ctx = replace(ctx, device=draw_task_device(task, ctx.seed, run.devices, env))
    try:
        traj, steps = run.play(env, task, policy, ctx, template)
    except Exception as e:  # a page bug or a dead browser must not stop the run
        result.errors.append((task.task_id, f"{type(e).__name__}: {e}"))
        if isinstance(e, BrowserCrashed) or not env.is_alive():
            env.restart()
        return None
    finally:
        close_episode_quietly(env)
    if policy.wrong_step is None or policy.reflection_text is None:
        why = policy.skip_reason or (
            f"no tap at or after step {policy.wrong_at} to replace"
            if policy.wrong_step is None
            else f"episode ended at step {policy.wrong_step.index}, before its reflection"
        )
        result.skipped.append((task.task_id, why))
        return None
    traj = traj.model_copy(update={"source_name": SOURCE_NAME})
    return traj, steps, policy.record(traj)


def write_sidecar(store: RawStore, collection: str) -> Path:
    """Rebuild reflection.parquet from the JSON lines of committed trajectories (sorted)."""
    jsonl, parquet = sidecar_paths(store, collection)
    committed = store.committed_ids(collection)
    rows: dict[str, dict] = {}
    if jsonl.exists():
        for n, line in enumerate(jsonl.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{jsonl}: line {n} is not JSON ({e})") from None
            if row.get("trajectory_id") in committed:
                rows[row["trajectory_id"]] = row  # a repeated line after a crash: the last wins
    ordered = [rows[k] for k in sorted(rows)]
    atomic_write_table(parquet, pa.Table.from_pylist(ordered, schema=SIDECAR_SCHEMA))
    return parquet
