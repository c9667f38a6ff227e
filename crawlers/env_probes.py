"""An environment's `probes` read on the live app, for its `predicates` verifiers.

Each driver answers the probes it can: a js probe is evaluated in the page (a
WebEnv's Playwright page, a Chromium phone's Appium session: crawlers.env_page), an
http probe is fetched by the crawler (the app's API; JSON, else text; a 404 is
null), a command probe runs in the desktop session (DesktopEnv.run_command; its
stdout, stripped). `pick` then walks into the value (schemas.predicate_eval.pick).
Only the probes a verifier's predicates name are read, once per verdict, or once per
state where many verdicts judge one unchanged state (a `StateMemo`: validation judges
every task's verifier on each end state). A probe
that cannot be read (an exception, a refused connection, another error status)
raises; the runtime makes it a VerifierError naming environment, task and probe.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from typing import Any

from schemas.environment import fill
from schemas.predicate_eval import EndState, pick, verdict
from schemas.predicates import Predicate, ProbeSpec

from .env_page import bounded_js, web_page


class ProbeError(RuntimeError):
    """A probe could not be read (not a value: an error of the environment)."""


@dataclass
class StateMemo:
    """One unchanged state judged by many verdicts: each probe (as filled) read once,
    each tree parsed once."""

    probes: dict[str, Any] = field(default_factory=dict)
    states: dict[tuple[str, str], EndState] = field(default_factory=dict)

    def probe(self, name: str, spec: ProbeSpec, env, values: dict) -> Any:
        key = name + "\0" + fill(json.dumps(spec.model_dump(mode="json"), sort_keys=True), **values)
        if key not in self.probes:
            self.probes[key] = read_probe(name, spec, env, values)
        return self.probes[key]

    def state(self, url: str, tree: str, probes: dict[str, Any]) -> EndState:
        """The state with these probe values; its tree parsed (and indexed) once."""
        base = self.states.get((url, tree))
        if base is None:
            base = self.states[url, tree] = EndState(url=url, a11y_tree=tree)
            _ = base.nodes  # parsed now: the copies below share the parse
        return replace(base, probes=probes)


def read_probe(name: str, spec: ProbeSpec, env, values: dict) -> Any:
    """The value of probe `name` now, placeholders filled with `values`."""
    if spec.js is not None:
        page = web_page(env)
        if page is None:
            raise ProbeError(f"probe '{name}': a js probe needs a page; {type(env).__name__} has none")
        raw = page.evaluate(bounded_js(fill(spec.js, **values), spec.timeout_s), None)
    elif spec.http is not None:
        raw = _get(name, spec, fill(spec.http, **values))
    else:
        run = getattr(env, "run_command", None)
        if run is None:
            raise ProbeError(f"probe '{name}': a command probe needs a desktop session")
        _status, out, _err = run(fill(spec.command, **values), timeout_s=spec.timeout_s)
        raw = out.strip()
        if spec.pick:
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                pass  # text: `length` still reads it
    return pick(raw, spec.pick)


def read_probes(probes: dict[str, ProbeSpec], env, values: dict) -> dict[str, Any]:
    """Every probe's value now, for a walk's record; one that cannot be read is left out
    (a walk records what it can: a probe error ends no episode)."""
    out = {}
    for name, spec in probes.items():  # in the file's order: the first of two alike is the goal
        try:
            out[name] = read_probe(name, spec, env, values)
        except Exception:  # noqa: BLE001 - any failure to read is "not read", never a crash
            continue
    return out


def _get(name: str, spec: ProbeSpec, url: str) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json", **spec.headers})
    try:
        with urllib.request.urlopen(req, timeout=spec.timeout_s) as resp:
            text = resp.read(10_000_000).decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None  # what the probe reads is not there
        raise ProbeError(f"probe '{name}': GET {url} answered HTTP {e.code}") from e
    except (urllib.error.URLError, OSError) as e:
        raise ProbeError(f"probe '{name}': GET {url} failed: {e}") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def predicates_verdict(
    predicates: list[Predicate],
    probes: dict[str, ProbeSpec],
    env,
    observation,
    values: dict,
    memo: StateMemo | None = None,
) -> dict:
    """The verdict of `predicates` on the env's current state (its observation, the
    probes they name read now, or once for all verdicts sharing `memo`)."""
    names = sorted({p.probe for p in predicates if p.probe is not None})
    if memo is None:
        read = {name: read_probe(name, probes[name], env, values) for name in names}
    else:
        read = {name: memo.probe(name, probes[name], env, values) for name in names}
    url, tree = observation.url or "", observation.a11y_tree or ""
    state = EndState(url=url, a11y_tree=tree, probes=read) if memo is None else memo.state(url, tree, read)
    return verdict(predicates, state)
