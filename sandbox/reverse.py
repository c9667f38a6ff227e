"""Reverse task synthesis (OS-Genesis) on the sandbox: replay a walk's named task, keep what is confirmed.

For each random-walk trajectory, `name_walks` (synthesis.reverse_env.walk_namer:
a VLM reads the walk, its actions in words and first and last screenshots, all
recorded text quoted as data) gives the high-level task a user could have
given. The agent then plays that task live from the same start (same app,
session seed and device): that part is this module's, an episode runner on
the collection side. A sandbox walk has no template predicate for an invented
task, so `verify_replays` (filters.judge.replay_verifier: the Judge over the
recorded replay) decides; only a confirmed replay is kept, as a trajectory with
outcome "success" and verified_by "judge".

Kept replays go to `reverse/<model>`; rejected ones to
`reverse-rejected/<model>` with the reason in `error`: every walk is counted.
Replays have stable ids, so a re-run skips walks already replayed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

from crawlers.agent import AgentPolicy, AgentSettings, settle_unparseable
from crawlers.crawl_driver import RetryPolicy
from crawlers.env_source import OneEnv, close_episode_quietly, open_env_source
from crawlers.episode import CrawlEnv, EpisodeContext
from crawlers.guard import SafetyGuard
from crawlers.web_env import BrowserCrashed
from sandbox.crawl import draw_task_device
from sandbox.environment import SOURCE_NAME, sandbox_environment
from sandbox.episode import SandboxRun
from schemas.converters.gui_libra import Coords
from schemas.records import Step, Task, Trajectory, trajectory_id_for
from trajforge.store.raw import RawStore, model_slug
from trajforge.vlm.backends import VLMBackend


class Verdict(Protocol):
    success: bool | None  # None: the verifier's answer did not parse
    reason: str


# (walk, its steps, the language to write in) for each walk -> its instruction or None.
WalkNamer = Callable[[list[tuple[Trajectory, list[Step], str]]], list["str | None"]]
# The replays (trajectory, steps; screenshots in the store's blobs) -> one verdict each.
ReplayVerifier = Callable[[list[tuple[Trajectory, list[Step]]]], list[Verdict]]

log = logging.getLogger(__name__)


@dataclass
class ReverseItem:
    walk_id: str
    replay_id: str
    instruction: str | None
    kept: bool
    reason: str  # why it was kept or rejected
    judge_success: bool | None = None


@dataclass
class ReverseResult:
    model_id: str
    collection: str  # kept replays
    rejected_collection: str
    total: int = 0  # walks given
    kept: int = 0  # confirmed (this call and earlier ones)
    skipped: int = 0  # replayed by an earlier call
    reasons: dict[str, int] = field(default_factory=dict)  # rejection reason -> count
    items: list[ReverseItem] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def kept_rate(self) -> float | None:
        return self.kept / self.total if self.total else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["kept_rate"] = self.kept_rate
        return d


def reverse_task(walk: Trajectory, instruction: str, language: str) -> Task:
    """The synthesised task: same app and session seed as the walk, no template."""
    params = {"seed": walk.task.params.get("seed", walk.seed), "reverse_of": walk.trajectory_id}
    return Task(
        task_id=f"reverse:{walk.trajectory_id}",
        instruction=instruction,
        language=language,
        app=walk.app,
        template_id=None,
        params=params,
        start_url=walk.task.start_url,
    )


@dataclass(frozen=True)
class ReverseReplays:
    """How the named tasks are replayed in the sandbox at `server_url`.

    language: of the written tasks (default: each walk's task language). The
    replay runs on the walk's device, with no distractions, up to `max_steps`;
    `seed` is the agent's sampling seed (greedy decoding ignores it); walks are
    named `batch_size` at a time. The collections default to reverse/<model>
    and reverse-rejected/<model>.
    """

    server_url: str
    language: str | None = None
    max_steps: int = 15
    seed: int = 0
    coords: Coords = "pixels"
    batch_size: int = 8
    guard: SafetyGuard | None = None
    collection: str | None = None
    rejected_collection: str | None = None


def reverse_tasks(
    walks: Iterable[tuple[Trajectory, list[Step]]],
    how: ReverseReplays,
    *,
    name_walks: WalkNamer,
    verify_replays: ReplayVerifier,
    agent_backend: VLMBackend,
    store: RawStore,
    env: CrawlEnv | None = None,
) -> ReverseResult:
    """Name each walk's task with `name_walks`, replay it with `agent_backend`'s agent,
    keep what `verify_replays` confirms.
    """
    guard, seed = how.guard or SafetyGuard(), how.seed
    model_id = agent_backend.model_id
    slug = model_slug(model_id)
    result = ReverseResult(
        model_id=model_id,
        collection=how.collection or f"reverse/{slug}",
        rejected_collection=(how.rejected_collection or f"reverse-rejected/{slug}"),
    )
    started = time.perf_counter()
    walks = [(w, sorted(s, key=lambda s: s.index)) for w, s in walks]
    result.total = len(walks)
    with (
        store.writer(result.collection, batch_size=1) as kept_w,
        store.writer(result.rejected_collection, batch_size=1) as rejected_w,
        store.audit_log(result.collection) as audit,
    ):
        todo = []
        for walk, steps in walks:
            tid = trajectory_id_for(SOURCE_NAME, f"reverse:{walk.trajectory_id}", "agent", model_id, seed)
            if kept_w.has(tid) or rejected_w.has(tid):
                result.skipped += 1
                result.kept += kept_w.has(tid)
                continue
            if not steps:  # an errored walk: nothing to name
                result.items.append(ReverseItem(walk.trajectory_id, tid, None, False, "walk has no steps"))
                result.reasons["walk has no steps"] = result.reasons.get("walk has no steps", 0) + 1
                continue
            todo.append((walk, steps, tid))
        if not todo:
            result.seconds = round(time.perf_counter() - started, 3)
            return result
        run = SandboxRun(
            server_url=how.server_url, store=store, max_steps=how.max_steps, guard=guard, audit=audit
        )
        with open_env_source(sandbox_environment(how.server_url), env=env) as source:
            for start in range(0, len(todo), how.batch_size):
                chunk = todo[start : start + how.batch_size]
                for item, traj, steps in _play_chunk(
                    chunk,
                    name_walks=name_walks,
                    verify_replays=verify_replays,
                    agent_backend=agent_backend,
                    run=run,
                    source=source,
                    how=how,
                ):
                    result.items.append(item)
                    if item.kept:
                        result.kept += 1
                    else:
                        result.reasons[item.reason] = result.reasons.get(item.reason, 0) + 1
                    if traj is not None:
                        (kept_w if item.kept else rejected_w).add(traj, steps)
    result.seconds = round(time.perf_counter() - started, 3)
    log.info("reverse task synthesis: %d of %d walks kept (%s)", result.kept, result.total, result.reasons)
    return result


def _why_unfinished(traj: Trajectory) -> str:
    error = traj.error or ""
    for prefix, why in (
        ("agent:", "unparseable answer"),
        ("guard ", "guard blocked"),
        ("max_steps", "max steps"),
        ("take_over", "take over"),
    ):
        if error.startswith(prefix):
            return why
    return traj.outcome


def _play_chunk(
    chunk, *, name_walks, verify_replays, agent_backend, run: SandboxRun, source: OneEnv, how: ReverseReplays
):
    """Yield (ReverseItem, replay trajectory or None, its steps) for each walk of the chunk."""
    named = name_walks([(walk, steps, how.language or walk.task.language) for walk, steps, _ in chunk])
    if len(named) != len(chunk):
        raise RuntimeError(f"name_walks gave {len(named)} instructions for {len(chunk)} walks")

    replays = []
    for (walk, _steps, tid), instruction in zip(chunk, named):
        if instruction is None:
            yield ReverseItem(walk.trajectory_id, tid, None, False, "instruction unparseable"), None, []
            continue
        task = reverse_task(walk, instruction, how.language or walk.task.language)
        policy = AgentPolicy(
            agent_backend, task, AgentSettings(max_steps=run.max_steps, coords=how.coords, seed=how.seed)
        )
        traj, rsteps = _replay(source, policy, task, run.episode(tid, how.seed, walk.device), run)
        if traj.outcome != "unknown":  # guard block, max steps, take-over, unparseable
            reason = f"replay did not finish: {_why_unfinished(traj)}"
            yield ReverseItem(walk.trajectory_id, tid, instruction, False, reason), traj, rsteps
            continue
        replays.append((walk, tid, instruction, traj, rsteps))

    if not replays:
        return
    verdicts = verify_replays([(traj, rsteps) for _, _, _, traj, rsteps in replays])
    if len(verdicts) != len(replays):
        raise RuntimeError(f"verify_replays gave {len(verdicts)} verdicts for {len(replays)} replays")
    for (walk, tid, instruction, traj, rsteps), verdict in zip(replays, verdicts):
        if verdict.success is None:
            item = ReverseItem(walk.trajectory_id, tid, instruction, False, "judge unparseable")
            traj = traj.model_copy(update={"error": "judge answer unparseable"})
        elif verdict.success:
            item = ReverseItem(
                walk.trajectory_id, tid, instruction, True, f"judge confirmed: {verdict.reason}"[:200], True
            )
            traj = traj.model_copy(update={"outcome": "success", "verified_by": "judge"})
        else:
            item = ReverseItem(walk.trajectory_id, tid, instruction, False, "judge rejected", False)
            traj = traj.model_copy(
                update={
                    "outcome": "failure",
                    "verified_by": "judge",
                    "error": f"judge: {verdict.reason}"[:300],
                }
            )
        yield item, traj, rsteps


def _replay(
    one: OneEnv, policy: AgentPolicy, task: Task, ctx: EpisodeContext, run: SandboxRun
) -> tuple[Trajectory, list[Step]]:
    """One agent episode of the named task (no template: the judge verifies it later),
    replayed from scratch when the browser dies; out of retries, the env's loss is raised."""
    if ctx.device is None:
        ctx = replace(ctx, device=draw_task_device(task, ctx.seed, run.devices, one.env))
    held = {"policy": policy}

    def attempt(n: int) -> tuple[Trajectory, list[Step]]:
        if n:  # the same agent from its first step: the episode is replayed from scratch
            p = held["policy"]
            held["policy"] = AgentPolicy(p.backend, p.task, p.settings)
        with one.lease() as live:
            try:
                traj, steps = run.play(live, task, held["policy"], replace(ctx, attempt=n), None)
            finally:
                close_episode_quietly(live)
        traj = settle_unparseable(traj, held["policy"])
        return traj.model_copy(
            update={"source_name": f"{SOURCE_NAME}:agent:{held['policy'].model_id}"}
        ), steps

    retry = RetryPolicy(run.retries, fatal=(), retry_on=(BrowserCrashed,))
    played, error = retry.run(attempt, what=ctx.trajectory_id, on_retry=lambda message: None)
    if error is not None:
        raise error
    return played
