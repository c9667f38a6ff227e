"""The parts of an environment file (schemas/environment.py): its verifiers, tasks,
exploration, native app, reset, screens and desktop waits."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .predicates import Predicate
from .records import Language, VerifierKind

# A python verifier's or an oracle's "module:function".
DOTTED_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class StrictModel(BaseModel):
    """A part of an environment file: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class VerifierSpec(StrictModel):
    """How a task's outcome is decided, after every step.

    - js: `expression`, evaluated in the page, gives {done, success, reward, reason}
      (a boolean alone means success; `done` defaults to false).
    - http: GET `url` (placeholders filled); a JSON answer of the same shape, or
      any answer mapped by `expression`, a JS function of the parsed body (or the
      text) evaluated in the page: `(r) => ({success: r.count > 0})`. An answer
      with a status of `not_done_status` (default [404]: what the task creates
      does not exist yet) is "not done" ({done: false, success: false}); any
      other 4xx/5xx is an error.
    - python: `function` is "module:function", called with
      (task, observation, history, env) and returning a verdict or a dict.
    - judge: the VLM judge of the configured backend reads the last screens.
    - state: a python verifier of the app's state: `url` (placeholders filled) is
      fetched and its JSON handed to `function` as `state=`.
    - command (desktop): `run`, a shell command run in the session's environment
      (its DISPLAY and HOME; the task's params as TASK_PARAM_<NAME>); exit status 0
      means done and successful, non-zero not done yet (and, at the episode's end,
      failure); or a JSON verdict {done, success, reward, reason} on stdout.
    - predicates: `predicates`, checks of the end state (the accessibility tree, the
      URL, the environment's `probes`; schemas.predicates), all true: done and
      successful; the reason names the first that fails.
    A python function may also take `session` and `seed` keywords.
    """

    kind: VerifierKind
    expression: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    function: str | None = None
    run: str | None = None
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    # Every step (the default), or only once the policy stops (an expensive judge).
    every_step: bool = True
    # http: the HTTP statuses that mean "not done yet" rather than an error.
    not_done_status: list[int] = Field(default_factory=lambda: [404])
    # predicates: a conjunction of checks of the end state.
    predicates: list[Predicate] = Field(default_factory=list)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> VerifierSpec:
        need = {
            "js": "expression",
            "http": "url",
            "python": "function",
            "state": "function",
            "command": "run",
            "predicates": "predicates",
        }
        field = need.get(self.kind)
        if field and not getattr(self, field):
            raise ValueError(f"a {self.kind} verifier needs '{field}'")
        if self.predicates and self.kind != "predicates":
            raise ValueError(f"'predicates' is for predicates verifiers, not {self.kind}")
        if self.run is not None and self.kind != "command":
            raise ValueError(f"'run' is for command verifiers, not {self.kind}")
        if self.function is not None and not DOTTED_FUNCTION.match(self.function):
            raise ValueError(f"function {self.function!r}: expected 'module:function'")
        # Compared with the default, not "was it given": a dumped spec is read back whole.
        if self.kind != "http" and self.not_done_status != [404]:
            raise ValueError(f"'not_done_status' is for http verifiers, not {self.kind}")
        bad = [s for s in self.not_done_status if not 400 <= s <= 599]
        if bad:
            raise ValueError(f"not_done_status {bad}: expected HTTP error statuses (400-599)")
        if self.kind == "judge":
            self.every_step = False  # one judgement of the whole episode
        return self


class TaskSpec(StrictModel):
    task_id: str = Field(min_length=1)
    instruction: str | None = None
    language: Language = "en"
    params: dict[str, Any] = Field(default_factory=dict)
    start_url: str | None = None
    verifier: VerifierSpec | None = None
    # Sandbox-style tasks keep their template (the oracle plans from it).
    template_id: str | None = None
    # The environment a task file was made for (a synthesised one names it): a file
    # for another environment is refused when it is loaded.
    environment: str | None = None
    # In [0, 1], written by `trajforge tasks validate` (crawlers/task_validation.py);
    # the curriculum sampler and online RL read it.
    difficulty: float | None = Field(default=None, ge=0, le=1)


class ExploreSpec(StrictModel):
    """Episodes without a task: the walk records, reverse synthesis names the task later.

    `policy`: random_walk (uniform over the visible controls, less-tapped ones
    preferred), frontier (coverage-guided: untried elements and screens first, over
    a screen graph kept beside the recording; crawlers/frontier.py) or agent.

    They are verified by their own `verifier` (the app's "done" signal, say),
    else by the environment's; `verifier: null` records them unverified (a
    default verifier that needs a task's params cannot judge a walk).
    """

    policy: Literal["random_walk", "frontier", "agent"] = "random_walk"
    episodes: int = Field(default=10, ge=1, le=100_000)
    max_steps: int = Field(default=15, ge=1, le=1_000)
    # A time budget: no episode starts once it is spent (a re-run goes on where it stopped).
    # With `minutes` and no `episodes` given, the episodes are capped only by the time.
    minutes: float | None = Field(default=None, gt=0, le=100_000)
    verifier: VerifierSpec | None = None
    # Shortcut keys the frontier walk may press on any screen ("ctrl+s"): what an app
    # does from its keyboard and no control in the tree offers (GTK 2 menus show none).
    keys: list[str] = Field(default_factory=list)
    # The share of the frontier walk's steps that type a new word into a text field in
    # view, tried or not: where an app's state is what is typed and then saved (a
    # spreadsheet's cells), one try of a field says little, a new word is a new state.
    retype: float = Field(default=0.0, ge=0.0, le=1.0)

    @field_validator("keys")
    @classmethod
    def _keys_named(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if not k.strip() or " " in k.strip()]
        if bad:
            raise ValueError(f"key {bad[0]!r}: expected a key or chord such as 'ctrl+s'")
        return [k.strip() for k in v]


class AppSpec(StrictModel):
    """A native app: Android package (+ activity) or iOS bundle id."""

    package: str | None = None
    activity: str | None = None
    bundle_id: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> AppSpec:
        if not (self.package or self.bundle_id):
            raise ValueError("give 'package' (Android) or 'bundle_id' (iOS)")
        return self


class ResetSpec(StrictModel):
    """How an episode starts over in a browser (web, mobile_web in Chromium).

    context (default): a fresh browser context per episode, nothing carried over;
    with `storage_state` (a Playwright storage-state JSON: cookies, localStorage)
    every context starts logged in. page: the context and page are kept between
    episodes of the same device and `script` (the app's own reset, JavaScript; a
    promise is awaited) runs before the start page loads again: no context to
    build, the HTTP cache warm. relaunch: a new browser per episode.
    """

    mode: Literal["context", "page", "relaunch"] = "context"
    storage_state: str | None = None
    script: str | None = None

    @model_validator(mode="after")
    def _fits_mode(self) -> ResetSpec:
        if self.script is not None and self.mode != "page":
            raise ValueError(
                "'script' is the app's own reset in mode 'page'; other modes start a fresh context"
            )
        if self.storage_state is not None and self.mode == "page":
            raise ValueError(
                "'storage_state' seeds a fresh context (mode 'context' or 'relaunch'); mode 'page' keeps its own"
            )
        return self


class Viewport(StrictModel):
    width: int = Field(gt=0, le=10_000)
    height: int = Field(gt=0, le=10_000)
    pixel_ratio: float = Field(default=1.0, gt=0, le=8)
    is_mobile: bool = False


class Display(StrictModel):
    """A desktop environment's X screen (platform: desktop)."""

    width: int = Field(default=1280, ge=200, le=8192)
    height: int = Field(default=800, ge=200, le=8192)
    dpi: int = Field(default=96, ge=48, le=480)


class DesktopWaitFor(StrictModel):
    """What a desktop episode waits for after `launch`: one of a window title, an
    accessibility node (role and/or name) or a shell condition (exit status 0)."""

    window: str | None = None
    role: str | None = None
    name: str | None = None
    run: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> DesktopWaitFor:
        kinds = [
            k
            for k, on in (("window", self.window), ("node", self.role or self.name), ("run", self.run))
            if on
        ]
        if len(kinds) != 1:
            raise ValueError("give one of {window: TITLE}, {role: ROLE, name: NAME} or {run: CMD}")
        return self


Commands = str | list[str]
