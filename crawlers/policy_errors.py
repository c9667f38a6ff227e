"""What a policy raises when it cannot go on; the episode ends as a failure that says why."""

from __future__ import annotations


class PolicyError(RuntimeError):
    """The policy cannot choose an action (a planner lost its target, a replay ran out)."""
