"""One sandbox episode, through the environment interface every app uses.

`run_episode` keeps the signature the sandbox's callers (the crawl, reflection
episodes, rollouts) know: it plays `task` in the sandbox environment
(sandbox/environment.py) with crawlers.env_episode.run_env_episode, verified
by the template's state check when `template` is given and recorded
unverified otherwise.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from functools import partial
from typing import Callable

from crawlers.crawl_episode import CrawlEnv, EpisodeInfo
from crawlers.env_episode import run_env_episode
from crawlers.env_runtime import EnvironmentRuntime
from crawlers.guard import SafetyGuard
from trajforge.store.audit import AuditLog
from crawlers.policies import Policy
from schemas.records import DeviceProfile, Step, Task, Trajectory
from trajforge.store.raw import BlobStore

from sandbox.environment import CHECK_STATE, check_state, sandbox_environment
from sandbox.tasks.base import TaskTemplate


def fetch_state(server_url: str, sid: str, timeout_s: float = 10.0) -> dict:
    """The session's state from the sandbox's HTTP API (any server, any process)."""
    url = f"{server_url.rstrip('/')}/api/state/{sid}"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read().decode("utf-8"))


def sandbox_runtime(server_url: str, distraction_rate: float,
                    template: TaskTemplate | None = None) -> EnvironmentRuntime:
    plugins = {}
    if template is not None:  # the template given is the one that checks (tests pass their own)
        plugins[CHECK_STATE] = partial(check_state, templates={template.template_id: template})
    return EnvironmentRuntime(sandbox_environment(server_url, distraction_rate), plugins=plugins)


def run_episode(env: CrawlEnv, *, server_url: str, task: Task, template: TaskTemplate | None,
                policy: Policy, device: DeviceProfile, theme: str, font_scale: float,
                distraction_rate: float, seed: int, trajectory_id: str, blobs: BlobStore,
                guard: SafetyGuard, max_steps: int = 30, audit: AuditLog | None = None,
                attempt: int = 0, on_step: Callable[[Step], None] | None = None,
                info: EpisodeInfo | None = None) -> tuple[Trajectory, list[Step]]:
    """Play `task` with `policy` in the sandbox at `server_url`; the verified trajectory.

    Raises BrowserCrashed when the browser dies and StartPageError when the
    start page does not load (the caller retries either).
    """
    runtime = sandbox_runtime(server_url, distraction_rate, template)
    device = device.model_copy(update={"theme": theme, "font_scale": font_scale})
    # A catalog task's start_url is the page /start leads to, not where to start.
    played = task.model_copy(update={"start_url": None}) if task.start_url else task
    traj, steps = run_env_episode(env, runtime, task=played, policy=policy, device=device,
                                  seed=seed, trajectory_id=trajectory_id, blobs=blobs,
                                  guard=guard, max_steps=max_steps, audit=audit,
                                  attempt=attempt, on_step=on_step, info=info,
                                  verify=template is not None)
    traj = traj.model_copy(update={"task": task})
    if template is None and not traj.distractions:
        # Unverified, but the pop-ups the session showed are still recorded.
        try:
            shown = fetch_state(server_url, trajectory_id).get("distractions", [])
        except (urllib.error.URLError, OSError, ValueError):
            shown = []
        traj = traj.model_copy(update={"distractions": [str(d) for d in shown]})
    return traj, steps
