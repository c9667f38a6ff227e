"""The sandbox as an environment: its apps reached through the interface a user's app uses.

`sandbox_environment(server_url)` is an `Environment` (schemas/environment.py)
like any environment file's: the start page is the sandbox's /start with the
episode's session, app, language, seed, theme and font scale; the verifier is
a `state` verifier (the session's state from /api/state/<session>, checked by
the task template: `check_state`); the oracle is the template's planner
(`oracle_policy`). Its values are planted by the sandbox itself
(`synthetic_data`).
"""

from __future__ import annotations

from functools import lru_cache

from sandbox.oracle_policy import OraclePolicy
from sandbox.tasks import TEMPLATES
from sandbox.tasks.base import TaskTemplate
from schemas.actions import ActionType
from schemas.environment import Environment, ExploreSpec, VerifierSpec
from schemas.observation import Observation
from schemas.records import Step, Task

SOURCE_NAME = "sandbox"
CHECK_STATE = "sandbox.environment:check_state"


@lru_cache(maxsize=32)
def sandbox_environment(server_url: str, distraction_rate: float = 0.25) -> Environment:
    """The sandbox served at `server_url`, every app, pop-ups at `distraction_rate`."""
    base = server_url.rstrip("/")
    return Environment(
        name="sandbox",
        source_name=SOURCE_NAME,
        platform="web",
        description="The embedded sandbox apps (EN/ZH), verified from their state.",
        start_url=(
            f"{base}/start?sid={{session}}&app={{app}}&lang={{language}}&seed={{seed}}"
            f"&theme={{theme}}&font_scale={{font_scale}}"
            f"&distraction_rate={distraction_rate}"
        ),
        allow=[base],
        languages=["en", "zh"],
        # The state is checked once the policy stops, as the template's check is written for.
        verifier=VerifierSpec(
            kind="state",
            url=f"{base}/api/state/{{session}}",
            function=CHECK_STATE,
            every_step=False,
            timeout_s=10.0,
        ),
        oracle="sandbox.environment:oracle_policy",
        synthetic_data=True,
        # check_state needs a task template: a walk has none, so walks stay unverified.
        explore=ExploreSpec(policy="random_walk", verifier=None),
        max_steps=30,
    )


def sandbox_app_environment(server_url: str, app: str, distraction_rate: float = 0.0) -> Environment:
    """One sandbox app as an environment of its own (named sandbox-<app>): its start page
    for every episode, so exploration walks (which name no task template) play it."""
    env = sandbox_environment(server_url, distraction_rate)
    return env.model_copy(update={"name": f"sandbox-{app}", "start_url": env.start_url.replace("{app}", app)})


def last_answer(history: list[Step]) -> str | None:
    answers = [s.action.text for s in history if s.action.type == ActionType.ANSWER]
    return answers[-1] if answers else None


def check_state(
    task: Task,
    observation: Observation,
    history: list[Step],
    env,
    *,
    state: dict,
    templates: dict[str, TaskTemplate] | None = None,
) -> dict:
    """The task template's check of the session's state (and the answer given)."""
    templates = TEMPLATES if templates is None else templates
    template = templates.get(task.template_id or "")
    if template is None:
        raise ValueError(f"task {task.task_id}: no template {task.template_id!r} to check with")
    ok = template.check(task, state["state"], last_answer(history))
    return {
        "done": True,
        "success": bool(ok),
        "distractions": [str(d) for d in state.get("distractions", [])],
    }


def oracle_policy(
    task: Task, environment: Environment | None = None, templates: dict[str, TaskTemplate] | None = None
) -> OraclePolicy:
    templates = TEMPLATES if templates is None else templates
    if task.template_id not in templates:
        raise ValueError(
            f"task {task.task_id}: the oracle policy needs a known template_id (got {task.template_id!r})"
        )
    return OraclePolicy(templates[task.template_id], task)
