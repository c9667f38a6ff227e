"""Restoring the start state of a backward-curriculum slice (synthesis/backward.py) in the sandbox.

`restore_state` puts an environment in s_{T-k}: it opens a FRESH sandbox
session of the same app, language, seed, theme and font scale, replays the
first T-k recorded actions, and checks the screen it reaches against the
recorded observation at s_{T-k} (same URL, same
schemas.screen_signature of the accessibility tree). The env is left
on that screen for the caller's rollout; the caller closes the episode.

Session ids: the sandbox seeds its distraction pop-ups by (seed, sid, page
load). A trajectory that met no distraction is restored in a new session
"<trajectory_id>-restore-<k>" with distractions off, which leaves the original
session alone. One that met distractions can only be replayed under its own
sid and the crawl's distraction rate (not recorded on the trajectory: pass
`distraction_rate`); that restarts the session of that id on the server.

Compare against raw steps: curation may scrub text in the a11y tree (PII), and
a scrubbed tree no longer matches the live screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawlers.episode import CrawlEnv
from sandbox.server import start_url
from schemas.observation import Observation
from schemas.records import Step, Trajectory, session_seed
from schemas.screen_signature import screen_signature


def _ordered(steps: list[Step], traj: Trajectory) -> list[Step]:
    # As synthesis.backward orders the slices' steps (collection does not import synthesis).
    ordered = sorted(steps, key=lambda s: s.index)
    for s in ordered:
        if s.trajectory_id != traj.trajectory_id:
            raise ValueError(
                f"trajectory {traj.trajectory_id}: step {s.index} belongs to trajectory {s.trajectory_id}"
            )
    return ordered


@dataclass
class RestoredState:
    """The state an env reached by replaying the first T-k actions, and whether it is s_{T-k}."""

    trajectory_id: str
    k: int
    sid: str  # the sandbox session the replay ran in
    observation: Observation
    expected_url: str
    expected_signature: str
    signature: str
    replayed: int  # actions replayed (T - k)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (step index, action error)

    @property
    def url_matches(self) -> bool:
        return self.observation.url == self.expected_url

    @property
    def matches(self) -> bool:
        return self.url_matches and self.signature == self.expected_signature


def _check_replayable(traj: Trajectory, ordered: list[Step], k: int) -> None:
    T = len(ordered)
    if not 1 <= k <= T:
        raise ValueError(f"trajectory {traj.trajectory_id}: k={k} is not in 1..{T}")
    prefix = ordered[: T - k + 1]  # the replayed steps and the start observation
    if [s.index for s in prefix] != list(range(len(prefix))):
        raise ValueError(
            f"trajectory {traj.trajectory_id}: step indices "
            f"{[s.index for s in prefix]} have gaps before the start of slice k={k}; "
            "replay needs every earlier step (use the raw steps, not curated ones)"
        )
    for s in prefix[:-1]:
        if s.guard:
            raise ValueError(
                f"trajectory {traj.trajectory_id}, step {s.index}: the guard blocked "
                "this action in the recording; it cannot be replayed"
            )


def restore_state(
    env: CrawlEnv,
    server_url: str,
    traj: Trajectory,
    steps: list[Step],
    k: int,
    *,
    sid: str | None = None,
    distraction_rate: float | None = None,
) -> RestoredState:
    """Replay the first T-k actions of `traj` in a fresh sandbox session and check s_{T-k}."""
    ordered = _ordered(steps, traj)
    _check_replayable(traj, ordered, k)
    T = len(ordered)
    if traj.distractions:
        if distraction_rate is None:
            raise ValueError(
                f"trajectory {traj.trajectory_id} met distractions "
                f"{traj.distractions}: pass the crawl's distraction_rate to replay "
                "them (it is not recorded on the trajectory)"
            )
        sid = sid or traj.trajectory_id  # the pop-up schedule is seeded by the original sid
    else:
        distraction_rate = 0.0
        sid = sid or f"{traj.trajectory_id}-restore-{k}"
    task = traj.task
    url = start_url(
        server_url,
        sid=sid,
        app=task.app,
        lang=task.language,
        seed=session_seed(task.params, traj.seed),
        theme=traj.device.theme,
        font_scale=traj.device.font_scale,
        distraction_rate=distraction_rate,
    )
    obs = env.reset(url, device=traj.device)
    errors = []
    for s in ordered[: T - k]:
        obs = env.step(s.action)
        if obs.last_action_error:
            errors.append((s.index, obs.last_action_error))
    target = ordered[T - k]
    return RestoredState(
        trajectory_id=traj.trajectory_id,
        k=k,
        sid=sid,
        observation=obs,
        expected_url=target.url,
        expected_signature=screen_signature(target.a11y_tree),
        signature=screen_signature(obs.a11y_tree),
        replayed=T - k,
        errors=errors,
    )
