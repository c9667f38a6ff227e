"""A `predicates` verifier's checks and an environment file's `probes` (the models).

A predicates verifier is a conjunction of checks over the observed end state of
an episode, never the path it took (schemas.predicate_eval evaluates them):

    verifier:
      kind: predicates
      predicates:
        - element: {role: switch, name: Wi-Fi}     # the accessibility tree
          checked: true
        - element: {role: dialog}
          present: false
        - url: {path: /world/cities, query: {_sort: population}}
        - probe: saved                              # one of the file's `probes`
          contains: milk

A predicate is one of three kinds, told by its key: `element`, `url` or `probe`;
each kind takes only its own checks (unknown fields are errors). An environment
file's `probes` name values read from the app at verification time:

    probes:
      titles: {js: "$tw.wiki.filterTiddlers('[!is[system]]')"}
      saved: {http: "http://127.0.0.1:8091/recipes/default/tiddlers.json", pick: "*.title"}
      note: {command: cat "$HOME/note.txt"}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

_ELEMENT_CHECKS = ("present", "checked", "selected", "expanded", "value", "value_contains")
_PROBE_CHECKS = ("equals", "not_equals", "contains", "greater_than", "less_than")
PROBE_NAME = r"^[A-Za-z_][\w-]*$"


class FieldError(ValueError):
    """A file's value that is wrong where another part of the file says so; `field` is
    its dotted path (schemas.environment.environment_from_dict names it)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ElementRef(_Strict):
    """An element of the accessibility tree: its role (the web's words on every
    platform), and its accessible name equal to `name` (spaces collapsed) or
    containing `name_contains` (case ignored); neither: any name."""

    role: str = Field(min_length=1)
    name: str | None = None
    name_contains: str | None = None

    @model_validator(mode="after")
    def _one_name(self) -> ElementRef:
        if self.name is not None and self.name_contains is not None:
            raise ValueError("give 'name' or 'name_contains', not both")
        return self


class UrlCheck(_Strict):
    """The page's URL (percent-decoded): its path equal to `path` (a trailing slash
    aside) or containing `path_contains`; each key of `query` present with that
    value (null: present with any value)."""

    path: str | None = None
    path_contains: str | None = None
    query: dict[str, str | None] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _something(self) -> UrlCheck:
        if self.path is None and self.path_contains is None and not self.query:
            raise ValueError("a url check needs 'path', 'path_contains' or 'query'")
        if self.path is not None and self.path_contains is not None:
            raise ValueError("give 'path' or 'path_contains', not both")
        return self


class Predicate(_Strict):
    """One check of the end state: an `element`, the `url` or a `probe`'s value."""

    element: ElementRef | None = None
    # element: present (default) or absent; its states and value when present.
    present: bool = True
    checked: bool | Literal["mixed"] | None = None
    selected: bool | None = None
    expanded: bool | None = None
    value: str | None = None
    value_contains: str | None = None
    url: UrlCheck | None = None
    probe: str | None = Field(default=None, pattern=PROBE_NAME)
    # probe: exactly one comparison of its value.
    equals: Any = None
    not_equals: Any = None
    contains: Any = None
    greater_than: float | None = None
    less_than: float | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Predicate:
        kinds = [k for k in ("element", "url", "probe") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("a predicate is one of {element: ...}, {url: ...} or {probe: NAME}")
        given = self.model_fields_set
        kind = kinds[0]
        if kind != "element":
            extra = [f for f in _ELEMENT_CHECKS if f in given]
            if extra:
                raise ValueError(f"'{extra[0]}' is for element predicates, not {kind}")
        if kind != "probe":
            extra = [f for f in _PROBE_CHECKS if f in given]
            if extra:
                raise ValueError(f"'{extra[0]}' is for probe predicates, not {kind}")
        if kind == "probe":
            chosen = [f for f in _PROBE_CHECKS if f in given]
            if len(chosen) != 1:
                raise ValueError(
                    f"probe '{self.probe}': give exactly one of {', '.join(_PROBE_CHECKS)}"
                    + (f" (got {', '.join(chosen)})" if chosen else "")
                )
        if kind == "element":
            states = [f for f in _ELEMENT_CHECKS[1:] if getattr(self, f) is not None]
            if not self.present and states:
                raise ValueError(f"'{states[0]}' checks a present element, not one with present: false")
            if self.value is not None and self.value_contains is not None:
                raise ValueError("give 'value' or 'value_contains', not both")
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler) -> Any:
        """Only the fields given: a dumped predicate reads back as the same predicate (a
        comparison with null stays, whatever `exclude_none` says)."""
        out = handler(self)
        if not isinstance(out, dict):
            return out
        given = self.model_fields_set
        kept = {k: v for k, v in out.items() if k in given}
        for k in _PROBE_CHECKS:
            if k in given and k not in kept:
                kept[k] = None
        return kept

    @property
    def kind(self) -> str:
        return "element" if self.element is not None else "url" if self.url is not None else "probe"

    def comparison(self) -> tuple[str, Any]:
        """A probe predicate's (operator, operand)."""
        for f in _PROBE_CHECKS:
            if f in self.model_fields_set:
                return f, getattr(self, f)
        raise ValueError("not a probe predicate")


class ProbeSpec(_Strict):
    """A value read from the app when a predicate names it: a JavaScript expression
    evaluated in the page (web, mobile_web), an HTTP GET (the JSON body, else the
    text; a 404 answer is null), or a shell command in a desktop session (its stdout,
    stripped). Placeholders are filled; `pick` walks into the value ("rows.0.title",
    "length": the length of a list, text or object; "*.title": every item's title)."""

    js: str | None = None
    http: str | None = None
    command: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    pick: str | None = None
    timeout_s: float = Field(default=5.0, gt=0, le=120)

    @model_validator(mode="after")
    def _one_source(self) -> ProbeSpec:
        kinds = [k for k in ("js", "http", "command") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a probe is one of {js: EXPRESSION}, {http: URL} or {command: SHELL}")
        if self.headers and self.http is None:
            raise ValueError("'headers' is for http probes")
        return self

    @property
    def kind(self) -> str:
        return "js" if self.js else "http" if self.http else "command"


def check_probes(
    predicates_at: list[tuple[str, str | None, list[Predicate]]],
    probes: dict[str, ProbeSpec],
    platform: str,
) -> None:
    """Every probe a predicate names is declared, and runs on `platform`.

    `predicates_at`: (field path, task id or None, predicates) of each predicates
    verifier of a file. Raises FieldError naming the task and the field.
    """
    for name, spec in probes.items():
        if spec.kind == "js" and platform not in ("web", "mobile_web"):
            raise FieldError(
                f"a js probe needs a page (web, mobile_web), not {platform}", f"probes.{name}.js"
            )
        if spec.kind == "command" and platform != "desktop":
            raise FieldError(
                f"a command probe runs in a desktop session (platform: desktop), not {platform}",
                f"probes.{name}.command",
            )
    declared = ", ".join(sorted(probes)) or "none"
    for where, task_id, predicates in predicates_at:
        for i, p in enumerate(predicates):
            if p.probe is not None and p.probe not in probes:
                who = f"task '{task_id}': " if task_id else ""
                raise FieldError(
                    f"{who}probe '{p.probe}' is not declared in the file's 'probes' (declared: {declared})",
                    f"{where}.predicates.{i}.probe",
                )
