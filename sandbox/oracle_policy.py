"""The sandbox's oracle: a task template's plan, played against the live tree.

It is the environment's `oracle` plugin (sandbox/environment.py); crawlers
know it only as a Policy.
"""

from __future__ import annotations

from sandbox.tasks.base import PlanOracle, TaskTemplate
from schemas.actions import Action
from schemas.observation import Observation
from schemas.records import Element, Task


class OraclePolicy:
    """The template's plan, resolved against the live tree at every step."""

    name = "oracle"

    def __init__(self, template: TaskTemplate, task: Task):
        self.template = template
        self.task = task
        self.oracle: PlanOracle = template.oracle(task)

    def act(self, obs: Observation) -> Action:
        return self.oracle.next_action(obs)  # OracleError ends the episode

    @property
    def last_target(self) -> Element | None:
        return self.oracle.last_target
