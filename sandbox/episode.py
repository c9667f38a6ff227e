"""One sandbox episode, through the environment interface every app uses.

`run_episode` is what the sandbox's callers (the crawl, reflection episodes,
rollouts, reverse replays) play through: it plays `task` in the sandbox environment
(sandbox/environment.py) with crawlers.env_episode.run_env_episode, verified
by the template's state check when `template` is given and recorded
unverified otherwise.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from functools import partial

from crawlers.crawl_episode import CrawlEnv, EpisodeContext
from crawlers.env_episode import run_env_episode
from crawlers.env_runtime import EnvironmentRuntime
from crawlers.policies import Policy
from schemas.records import Step, Task, Trajectory

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


def run_episode(env: CrawlEnv, task: Task, policy: Policy, ctx: EpisodeContext, *,
                server_url: str, distraction_rate: float,
                template: TaskTemplate | None = None) -> tuple[Trajectory, list[Step]]:
    """Play `task` with `policy` in the sandbox at `server_url`; the verified trajectory.

    `ctx.device` carries the episode's theme and font scale (the start page
    applies them). Raises BrowserCrashed when the browser dies and
    StartPageError when the start page does not load (the caller retries either).
    """
    runtime = sandbox_runtime(server_url, distraction_rate, template)
    # A catalog task's start_url is the page /start leads to, not where to start.
    played = task.model_copy(update={"start_url": None}) if task.start_url else task
    traj, steps = run_env_episode(env, runtime, played, lambda _: policy, ctx,
                                  verify=template is not None)
    traj = traj.model_copy(update={"task": task})
    if template is None and not traj.distractions:
        # Unverified, but the pop-ups the session showed are still recorded.
        try:
            shown = fetch_state(server_url, ctx.trajectory_id).get("distractions", [])
        except (urllib.error.URLError, OSError, ValueError):
            shown = []
        traj = traj.model_copy(update={"distractions": [str(d) for d in shown]})
    return traj, steps
