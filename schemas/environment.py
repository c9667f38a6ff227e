"""The environment file: one app a crawl can play, written in YAML by its owner.

An environment says where the app starts, what the recording may reach, which
screens to emulate, what to run after each reset, which tasks to play and how
to decide whether a task succeeded (its verifier). The sandbox's apps and a
lab's own apps are described the same way; `crawlers/` reads nothing else.

Loading validates everything and names the file, the environment and the
field in every error (`EnvironmentError`). Tasks are inline or in a JSONL or
Parquet file beside the environment file.

Deployment values: `${NAME}` and `${NAME:-default}` (upper-case names only,
so JavaScript's template literals stay as written) are read from the
environment variables when the file is loaded: one file serves a laptop and a
staging server.

Placeholders: `{seed}` (a task's own `params.seed`, else the crawl's),
`{task_id}`, `{session}`, `{language}`, `{app}` and the episode's `{theme}`
and `{font_scale}` (drawn from the seed) are the only names replaced in
`start_url`, `setup`, `wait_for`, `instruction_js` and verifier URLs; every
other brace (JavaScript's objects and blocks) stays as written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from .environment_file import EnvironmentFileError, expand_variables, read_task_file
from .environment_specs import (
    DOTTED_FUNCTION,
    AppSpec,
    Commands,
    DesktopWaitFor,
    Display,
    ExploreSpec,
    ResetSpec,
    StrictModel,
    TaskSpec,
    VerifierSpec,
    Viewport,
)
from .predicates import PROBE_NAME, FieldError, ProbeSpec, check_probes
from .records import Language, Task

PLATFORMS = ("web", "mobile_web", "android", "ios", "desktop")
# A desktop session's own folder (crawlers/desktop_session.py), new for every session: an
# app that shows a path under it (a file manager's location, a Save dialog) shows text
# that no other session shows, so it is volatile on every desktop environment.
DESKTOP_ROOT_PREFIX = "tf-desktop-"
DESKTOP_VOLATILE = rf"/[^\s'\"]*{DESKTOP_ROOT_PREFIX}[A-Za-z0-9_]+[^\s'\"]*"
EXPLORE_POLICIES = ("random_walk", "frontier", "agent")
PLACEHOLDERS = ("seed", "task_id", "session", "language", "app", "theme", "font_scale")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


def mask_volatile(text: str | None, patterns: list[str]) -> str:
    """`text` with every match of `patterns` (an environment's `volatile`) replaced."""
    out = text or ""
    for pattern in patterns:
        out = re.sub(pattern, "<volatile>", out)
    return out


def screen_digest(tree: str | None, volatile: list[str]) -> str:
    """A short hash of a screen's tree with its volatile text masked (replay checks)."""
    import hashlib

    return hashlib.sha1(mask_volatile(tree, volatile).encode("utf-8")).hexdigest()[:16]


def fill(template: str, **values: Any) -> str:
    """`template` with {seed}, {task_id}, {session}, {language} replaced; other braces kept."""

    def sub(m: re.Match) -> str:
        name = m.group(1)
        return str(values[name]) if values.get(name) is not None else m.group(0)

    return _PLACEHOLDER.sub(sub, template)


class Environment(StrictModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][\w.-]*$")
    platform: Literal["web", "mobile_web", "android", "ios", "desktop"] = "web"
    start_url: str | None = None
    app: AppSpec | None = None
    capabilities: dict[str, Any] = Field(default_factory=dict)
    allow: list[str] = Field(default_factory=list)
    devices: list[str] = Field(default_factory=list)
    viewport: Viewport | None = None
    languages: list[Language] = Field(default_factory=lambda: ["en"])
    # web: a script; desktop: shell commands or "module:function" before each episode.
    setup: Commands | None = None
    # web: a selector or JS condition; desktop: {window} | {role, name} | {run}.
    wait_for: str | DesktopWaitFor | None = None
    # desktop (platform: desktop): the X screen, the app's command, what runs after
    # each episode, and the network the app may reach (off unless origins are given).
    display: Display | None = None
    launch: Commands | None = None
    teardown: Commands | None = None
    network: Literal["off"] | list[str] = "off"
    wait_timeout_s: float = Field(default=10.0, gt=0, le=300)
    reset: ResetSpec = Field(default_factory=ResetSpec)
    tasks: list[TaskSpec] = Field(default_factory=list)
    instruction_js: str | None = None
    explore: ExploreSpec | None = None
    verifier: VerifierSpec | None = None
    # Values read from the app that `predicates` verifiers compare (schemas.predicates).
    probes: dict[str, ProbeSpec] = Field(default_factory=dict)
    max_steps: int = Field(default=30, ge=1, le=1_000)
    # Date.now() and new Date() fixed at this ISO time (timers still run), so that
    # replays of an app that shows clocks or "5 minutes ago" give the same screens.
    freeze_time: str | None = None
    # Regexes of text that changes between two identical visits (a query timer,
    # a clock); masked when replays and screens are compared.
    volatile: list[str] = Field(default_factory=list)
    # Values the app plants itself (fake users, fake cards): kept in targets.
    synthetic_data: bool = False
    # "module:function" giving a policy that plays a task (the sandbox's planner).
    oracle: str | None = None
    source_name: str | None = None
    description: str | None = None

    @field_validator("allow")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        for origin in v:
            if not re.match(r"^(https?|wss?)://[^/\s]+", origin):
                raise ValueError(
                    f"allow entry {origin!r}: expected an origin such as 'http://127.0.0.1:8000'"
                )
        return v

    @field_validator("wait_for", mode="before")
    @classmethod
    def _desktop_wait(cls, v: Any) -> Any:
        # A mapping is a desktop wait: its own error, not "expected a string".
        if isinstance(v, dict):
            try:
                return DesktopWaitFor.model_validate(v)
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                raise ValueError(
                    (f"{where}: " if where else "") + err["msg"].removeprefix("Value error, ")
                ) from None
        return v

    @field_validator("volatile")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"volatile pattern {pattern!r} is not a regex: {e}") from None
        return v

    @field_validator("probes")
    @classmethod
    def _probe_names(cls, v: dict[str, ProbeSpec]) -> dict[str, ProbeSpec]:
        for name in v:
            if not re.match(PROBE_NAME, name):
                raise ValueError(f"probe name {name!r}: expected letters, digits, '_' or '-'")
        return v

    @field_validator("oracle")
    @classmethod
    def _dotted(cls, v: str | None) -> str | None:
        if v is not None and not DOTTED_FUNCTION.match(v):
            raise ValueError(f"{v!r}: expected 'module:function'")
        return v

    @model_validator(mode="after")
    def _platform_fields(self) -> Environment:
        specs = [self.verifier, self.explore.verifier if self.explore else None] + [
            t.verifier for t in self.tasks
        ]
        if self.platform != "desktop":
            for name in ("display", "launch", "teardown"):
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is for platform: desktop, not {self.platform}")
            if self.network != "off":
                raise ValueError(
                    f"'network' is for platform: desktop; a {self.platform} environment has 'allow'"
                )
            if isinstance(self.wait_for, DesktopWaitFor):
                raise ValueError(
                    f"a {self.platform} wait_for is a selector or a JavaScript condition (a string)"
                )
            if isinstance(self.setup, list):
                raise ValueError(f"a {self.platform} setup is one script (a string)")
            if any(s is not None and s.kind == "command" for s in specs):
                raise ValueError("a command verifier runs in a desktop session (platform: desktop)")
        if self.platform == "desktop":
            self._desktop_fields(specs)
        elif self.platform in ("web", "mobile_web"):
            if not self.start_url and not any(t.start_url for t in self.tasks):
                raise ValueError(
                    f"a {self.platform} environment needs 'start_url' (or a start_url on every task)"
                )
            if self.app is not None:
                raise ValueError("'app' is for android/ios; a web environment has 'start_url'")
        else:
            if self.app is None:
                raise ValueError(
                    f"an {self.platform} environment needs 'app' (package/activity or bundle_id)"
                )
            # A native app has no page: what needs one is refused here, not mid-crawl.
            specs = [self.verifier] + [t.verifier for t in self.tasks]
            if "reset" in self.model_fields_set:
                raise ValueError(f"'reset' is for browsers; an {self.platform} app is relaunched by Appium")
            if any(s is not None and s.kind == "js" for s in specs) or self.instruction_js:
                raise ValueError(
                    f"an {self.platform} app has no page for JavaScript: use an "
                    f"http, predicates, python or judge verifier (and no instruction_js)"
                )
        if not self.tasks and self.explore is None and self.instruction_js is None:
            raise ValueError("give 'tasks', 'explore' or 'instruction_js': nothing to crawl")
        self._check_tasks()
        self._check_predicates()
        return self

    def _check_predicates(self) -> None:
        """Every probe a predicates verifier names is declared and runs on this platform."""
        at = [("verifier", None, self.verifier)]
        if self.explore is not None:
            at.append(("explore.verifier", None, self.explore.verifier))
        at += [(f"tasks.{i}.verifier", t.task_id, t.verifier) for i, t in enumerate(self.tasks)]
        check_probes(
            [(where, tid, s.predicates) for where, tid, s in at if s is not None and s.kind == "predicates"],
            self.probes,
            self.platform,
        )

    def _desktop_fields(self, specs: list[VerifierSpec | None]) -> None:
        if not self.launch:
            raise ValueError("a desktop environment needs 'launch' (the command that starts the app)")
        if DESKTOP_VOLATILE not in self.volatile:
            self.volatile.append(DESKTOP_VOLATILE)
        for name in ("start_url", "app", "instruction_js", "allow", "devices", "viewport"):
            if getattr(self, name):
                raise ValueError(
                    f"'{name}' is not for platform: desktop (it has 'launch', 'display' and 'network')"
                )
        if any(t.start_url for t in self.tasks):
            raise ValueError("a desktop task has no start_url: the episode starts with 'launch'")
        if isinstance(self.wait_for, str):
            raise ValueError(
                "a desktop wait_for is {window: TITLE}, {role: ROLE, name: NAME} or {run: CMD}, "
                f"not a string ({self.wait_for!r})"
            )
        if any(s is not None and s.kind in ("js", "http", "state") for s in specs):
            raise ValueError("a desktop app has no page: use a command, predicates, python or judge verifier")
        if isinstance(self.network, list):
            for origin in self.network:
                if not re.match(r"^(https?|wss?)://[^/\s]+", origin):
                    raise ValueError(
                        f"network entry {origin!r}: expected an origin such as 'https://example.org'"
                    )

    def _check_tasks(self) -> None:
        seen: set[str] = set()
        for i, t in enumerate(self.tasks):
            if t.task_id in seen:
                raise ValueError(f"tasks[{i}]: task_id {t.task_id!r} appears twice")
            seen.add(t.task_id)
            if t.instruction is None and self.instruction_js is None:
                raise ValueError(
                    f"tasks[{i}] ({t.task_id}): no 'instruction' and no "
                    f"'instruction_js' to read one from the page"
                )

    # ------------------------------------------------------------------ use
    @property
    def source(self) -> str:
        """The trajectories' source_name."""
        return self.source_name or self.name

    def verifier_for(self, task: TaskSpec | Task | None) -> VerifierSpec | None:
        """The verifier that judges an episode of `task`; None: nothing does (`unknown`).

        The one answer the crawl (crawlers.env_runtime) and the Dagster check
        `verified_outcomes` both ask. A task: its own `verifier`, else the
        environment's. An exploration episode (a Task with `params.explore`: a walk,
        or an episode of an app that states its task with `instruction_js`):
        `explore_verifier()`.
        """
        if isinstance(task, Task) and task.params.get("explore"):
            return self.explore_verifier()
        own = None
        if isinstance(task, TaskSpec):
            own = task.verifier
        elif isinstance(task, Task):
            spec = self.task_spec(task.task_id)
            own = spec.verifier if spec else None
        return own or self.verifier

    def explore_verifier(self) -> VerifierSpec | None:
        """What judges an exploration episode: `explore.verifier` when the file gives one
        (null: nothing), else the environment's `verifier`."""
        if self.explore is not None and "verifier" in self.explore.model_fields_set:
            return self.explore.verifier
        return self.verifier

    def task_spec(self, task_id: str) -> TaskSpec | None:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        return None

    def masked(self, text: str | None) -> str:
        """`text` (a tree, a URL) with every `volatile` match replaced by a marker."""
        return mask_volatile(text, self.volatile)

    def origins(self) -> list[str]:
        """What the recording may reach: `allow`, or the start URL's origin (desktop: `network`)."""
        if self.platform == "desktop":
            return list(self.network) if isinstance(self.network, list) else []
        if self.allow:
            return list(self.allow)
        urls = [self.start_url] + [t.start_url for t in self.tasks]
        out = []
        for u in urls:
            m = re.match(r"^(https?://[^/]+)", u or "")
            if m and m.group(1) not in out:
                out.append(m.group(1))
        return out

    def as_tasks(self) -> list[Task]:
        """The task records (the instruction may still come from `instruction_js`)."""
        return [
            Task(
                task_id=t.task_id,
                instruction=t.instruction or "(read from the page)",
                language=t.language,
                app=self.name,
                template_id=t.template_id,
                # A task file's difficulty (a synthesised task's) rides in the params: the
                # curriculum reads it where no crawl has measured the task.
                params={**t.params, **({"difficulty": t.difficulty} if t.difficulty is not None else {})},
                start_url=t.start_url,
            )
            for t in self.tasks
        ]


def load_environment(path: str | Path, *, tasks_file: str | Path | None = None) -> Environment:
    """Read and validate an environment file (YAML); `tasks_file` replaces its tasks."""
    path = Path(path)
    source = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EnvironmentFileError("no such file", source=source) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise EnvironmentFileError(f"not valid YAML: {e}", source=source) from None
    if not isinstance(raw, dict):
        raise EnvironmentFileError("expected a mapping at the top (name, platform, ...)", source=source)
    name = raw.get("name") if isinstance(raw.get("name"), str) else None
    raw = expand_variables(raw, source=source, environment=name)
    tasks = raw.get("tasks")
    if tasks_file is not None:
        tasks = str(tasks_file)
    if isinstance(tasks, str):
        tasks_path = Path(tasks)
        if not tasks_path.is_absolute():
            tasks_path = path.parent / tasks_path
        rows = read_task_file(tasks_path, environment=name)
        raw = {**raw, "tasks": expand_variables(rows, source=str(tasks_path), environment=name, path="tasks")}
    environment = environment_from_dict(raw, source=source)
    state = environment.reset.storage_state
    if state is not None:
        state_path = Path(state) if Path(state).is_absolute() else path.parent / state
        if not state_path.is_file():
            raise EnvironmentFileError(
                f"no such file {state_path}", source=source, environment=name, field="reset.storage_state"
            )
        environment.reset.storage_state = str(state_path.resolve())
    return environment


def environment_from_dict(raw: dict, *, source: str = "<dict>") -> Environment:
    name = raw.get("name") if isinstance(raw.get("name"), str) else None
    try:
        return Environment.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field; known: {_known_fields(err['loc'])}"
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            field = cause.field
        elif field and err["loc"][0] == "tasks" and len(err["loc"]) > 2:
            msg = _task_named(raw, err["loc"][1]) + msg
        raise EnvironmentFileError(msg, source=source, environment=name, field=field) from None


def _task_named(raw: dict, index: Any) -> str:
    """ "task 'ID': " for the task at `index` of the raw file, when it has an id."""
    tasks = raw.get("tasks")
    if isinstance(index, int) and isinstance(tasks, list) and index < len(tasks):
        task_id = tasks[index].get("task_id") if isinstance(tasks[index], dict) else None
        if isinstance(task_id, str):
            return f"task '{task_id}': "
    return ""


def _known_fields(loc: tuple) -> str:
    model: type[BaseModel] = Environment
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            break
        nested = _model_of(field.annotation)
        if nested is None:
            break
        model = nested
    return ", ".join(sorted(model.model_fields))


def _model_of(annotation) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None
