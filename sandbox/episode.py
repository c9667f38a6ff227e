"""One sandbox episode, through the environment interface every app uses.

`run_episode` is what the sandbox's callers (the crawl, reflection episodes,
rollouts, reverse replays) play through: it plays `task` in the sandbox environment
(sandbox/environment.py) with crawlers.episode.run_env_episode, verified
by the template's state check when `template` is given and recorded
unverified otherwise.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import partial

from crawlers.env_runtime import EnvironmentRuntime
from crawlers.episode import CrawlEnv, EpisodeContext, run_env_episode
from crawlers.guard import SafetyGuard
from crawlers.policies import Policy
from sandbox.environment import CHECK_STATE, check_state, sandbox_environment
from sandbox.tasks.base import TaskTemplate
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.store.audit import AuditLog
from trajforge.store.raw import RawStore


def fetch_state(server_url: str, sid: str, timeout_s: float = 10.0) -> dict:
    """The session's state from the sandbox's HTTP API (any server, any process)."""
    url = f"{server_url.rstrip('/')}/api/state/{sid}"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read().decode("utf-8"))


class SandboxRuntime(EnvironmentRuntime):
    """The sandbox's runtime: every episode starts at the sandbox's /start page."""

    def start_url(self, task: Task, *, session: str, seed: int) -> str:
        # A catalog task's start_url is the page /start leads to, not where to start.
        where = task.model_copy(update={"start_url": None}) if task.start_url else task
        return super().start_url(where, session=session, seed=seed)


def sandbox_runtime(
    server_url: str, distraction_rate: float, template: TaskTemplate | None = None
) -> SandboxRuntime:
    plugins = {}
    if template is not None:  # the template given is the one that checks (tests pass their own)
        plugins[CHECK_STATE] = partial(check_state, templates={template.template_id: template})
    return SandboxRuntime(sandbox_environment(server_url, distraction_rate), plugins=plugins)


def run_episode(
    env: CrawlEnv,
    task: Task,
    policy: Policy,
    ctx: EpisodeContext,
    *,
    server_url: str,
    distraction_rate: float,
    template: TaskTemplate | None = None,
) -> tuple[Trajectory, list[Step]]:
    """Play `task` with `policy` in the sandbox at `server_url`; the verified trajectory.

    `ctx.device` carries the episode's theme and font scale (the start page
    applies them). Raises BrowserCrashed when the browser dies and
    StartPageError when the start page does not load (the caller retries either).
    """
    runtime = sandbox_runtime(server_url, distraction_rate, template)
    traj, steps = run_env_episode(env, runtime, task, lambda _: policy, ctx, verify=template is not None)
    if template is None and not traj.distractions:
        # Unverified, but the pop-ups the session showed are still recorded.
        try:
            shown = fetch_state(server_url, ctx.trajectory_id).get("distractions", [])
        except (urllib.error.URLError, OSError, ValueError):
            shown = []
        traj = traj.model_copy(update={"distractions": [str(d) for d in shown]})
    return traj, steps


@dataclass(frozen=True)
class SandboxRun:
    """What every sandbox episode of one run shares: the server, the store, the budget.

    `devices` narrows the profiles a drawn device comes from; `retries` is how
    often an episode whose browser died is played again from scratch.
    """

    server_url: str
    store: RawStore
    guard: SafetyGuard
    max_steps: int = 30
    audit: AuditLog | None = None
    distraction_rate: float = 0.0
    devices: list[str] | None = None
    retries: int = 1

    def episode(self, tid: str, seed: int, device: DeviceProfile | None) -> EpisodeContext:
        return EpisodeContext(
            trajectory_id=tid,
            seed=seed,
            device=device,
            blobs=self.store.blobs,
            guard=self.guard,
            max_steps=self.max_steps,
            audit=self.audit,
        )

    def play(
        self,
        env: CrawlEnv,
        task: Task,
        policy: Policy,
        ctx: EpisodeContext,
        template: TaskTemplate | None = None,
    ) -> tuple[Trajectory, list[Step]]:
        return run_episode(
            env,
            task,
            policy,
            ctx,
            server_url=self.server_url,
            distraction_rate=self.distraction_rate,
            template=template,
        )
