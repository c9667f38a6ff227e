"""Backward-curriculum slices of long trajectories.

A trajectory s_0 a_0 s_1 ... s_{T-1} a_{T-1} of T steps gives T slices:
slice k (k = 1..T) starts from state s_{T-k} and has the last k actions left
to reach the goal. Training on k = 1 first, then larger k, lets a policy learn
the end of a long task before its beginning (reverse curriculum).

Restoring a slice's start state plays live, so it is collection's:
sandbox/restore.py `restore_state` replays the first T-k recorded actions in
a fresh sandbox session and checks the screen it reaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.actions import Action
from schemas.records import Step, Trajectory


@dataclass(frozen=True)
class Slice:
    """Slice k of a trajectory: start at s_{T-k}, k actions to the goal."""

    trajectory_id: str
    k: int
    start_position: int  # T - k: how many recorded steps come before the start
    start_index: int  # the Step.index of the start observation
    goal: str  # the task instruction
    actions: tuple[Action, ...]  # the k remaining recorded actions
    start_url: str
    start_screenshot: str  # sha256 of the start observation's screenshot


def _ordered(steps: list[Step], traj: Trajectory) -> list[Step]:
    ordered = sorted(steps, key=lambda s: s.index)
    for s in ordered:
        if s.trajectory_id != traj.trajectory_id:
            raise ValueError(
                f"trajectory {traj.trajectory_id}: step {s.index} belongs to trajectory {s.trajectory_id}"
            )
    return ordered


def backward_slices(traj: Trajectory, steps: list[Step]) -> list[Slice]:
    """The slices k = 1..T (T = the number of steps given), shortest first."""
    ordered = _ordered(steps, traj)
    T = len(ordered)
    out = []
    for k in range(1, T + 1):
        start = ordered[T - k]
        out.append(
            Slice(
                trajectory_id=traj.trajectory_id,
                k=k,
                start_position=T - k,
                start_index=start.index,
                goal=traj.task.instruction,
                actions=tuple(s.action for s in ordered[T - k :]),
                start_url=start.url,
                start_screenshot=start.screenshot,
            )
        )
    return out
