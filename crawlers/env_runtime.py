"""An environment file at run time: open a task's start page, run its setup, ask its verifier.

`EnvironmentRuntime` is everything the episode loop needs to know about an
app, read from an `Environment` (schemas/environment.py): where an episode
starts (the task's `start_url` or the environment's, placeholders filled),
that the start page really arrived (a network error or an HTTP 4xx/5xx is a
`StartPageError`, never a recorded trajectory), the `setup` script and the
`wait_for` condition, the instruction an app makes up itself
(`instruction_js`), and the verdict of the verifier after each step.

Verifiers (`Verdict`: done, success, reward, reason):
- js: the expression is evaluated in the page;
- http: the URL is fetched by the crawler (state lives on the server); the JSON
  answer is the verdict, or `expression` maps the body in the page; a status
  of `not_done_status` (default 404) is "not done", another error status an error;
- python / state: "module:function"(task, observation, history, env);
- judge: a callable given by the caller (the VLM judge lives in curation,
  above this layer) reads the episode once the policy stops;
- predicates: checks of the observation's tree and URL and of the file's probes
  (read by crawlers.env_probes, judged by schemas.predicate_eval).
A verifier that raises or times out is a `VerifierError`: the episode is
stored as an error that names the environment, the task and the verifier.
"""

from __future__ import annotations

import importlib
import inspect
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from schemas.environment import Environment, VerifierSpec, fill
from schemas.observation import Observation
from schemas.records import DeviceProfile, Step, Task

from .env_page import bounded_js, web_page
from .env_probes import StateMemo, predicates_verdict, read_probes
from .env_wait import wait_for_condition

# The HTTP status of the document that is shown (Chromium 109+).
_STATUS_JS = """() => { const n = performance.getEntriesByType('navigation')[0];
  return n && n.responseStatus ? n.responseStatus : null; }"""


class StartPageError(RuntimeError):
    """The episode's start page did not load (a timeout, a refused connection, an HTTP error)."""


class VerifierError(RuntimeError):
    """A verifier raised, timed out or answered something that is not a verdict."""


class HTTPStatusError(VerifierError):
    """A verifier's URL answered an HTTP error status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class SetupError(RuntimeError):
    """The environment's setup, wait_for or instruction_js failed."""


class WaitForTimeout(SetupError):
    """The environment's wait_for did not hold in time (wait_timeout_s)."""


@dataclass
class Verdict:
    done: bool = False
    success: bool | None = None
    reward: float | None = None
    reason: str | None = None
    kind: str = "none"
    # Pop-ups the app showed during the episode (the sandbox's distractions).
    distractions: list[str] | None = None

    @classmethod
    def coerce(cls, value: Any, kind: str, where: str) -> Verdict:
        """A verdict from what a verifier gave: a bool, a dict or a Verdict."""
        if isinstance(value, Verdict):
            value.kind = kind
            return value
        if isinstance(value, bool):
            return cls(success=value, reward=float(value), kind=kind)
        if not isinstance(value, dict):
            raise VerifierError(
                f"{where}: expected an object {{done, success, reward, reason}} "
                f"or a boolean, got {type(value).__name__}: {str(value)[:120]}"
            )
        unknown = set(value) - {"done", "success", "reward", "reason", "distractions"}
        if unknown:
            raise VerifierError(
                f"{where}: unknown key(s) {sorted(unknown)} in the verdict; "
                f"expected done, success, reward, reason"
            )
        success = value.get("success")
        if success is not None and not isinstance(success, bool):
            raise VerifierError(f"{where}: 'success' must be true, false or null, got {success!r}")
        reward = value.get("reward")
        if reward is not None:
            try:
                reward = float(reward)
            except (TypeError, ValueError):
                raise VerifierError(f"{where}: 'reward' must be a number, got {reward!r}") from None
        elif success is not None:
            reward = float(success)
        reason = value.get("reason")
        distractions = value.get("distractions")
        if distractions is not None and not (
            isinstance(distractions, list) and all(isinstance(d, str) for d in distractions)
        ):
            raise VerifierError(f"{where}: 'distractions' must be a list of strings")
        return cls(
            done=bool(value.get("done", False)),
            success=success,
            reward=reward,
            reason=None if reason is None else str(reason)[:2000],
            kind=kind,
            distractions=distractions,
        )


# A judge reads the task and the episode's steps and gives a verdict (a dict or Verdict).
JudgeFn = Callable[[Task, list[Step], Observation], Any]


def load_callable(dotted: str) -> Callable:
    module, _, name = dotted.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise VerifierError(f"cannot load {dotted!r}: {e}") from e
    if not callable(fn):
        raise VerifierError(f"{dotted!r} is not callable")
    return fn


def page_of(env):
    """The page of a WebEnv or of an Appium Chromium phone (JS verifiers, setup); a clear
    error for a native app."""
    page = web_page(env)
    if page is None:
        raise SetupError(
            f"{type(env).__name__} has no page to run JavaScript in "
            f"(js verifiers, setup scripts and instruction_js need a browser; "
            f"a native app's setup is a deep link)"
        )
    return page


class EnvironmentRuntime:
    """One environment's start, setup and verification for the episode loop."""

    def __init__(
        self,
        environment: Environment,
        *,
        judge: JudgeFn | None = None,
        plugins: dict[str, Callable] | None = None,
    ):
        """`plugins` maps "module:function" names to callables to use instead of
        importing them (an in-process provider's verifier with its own tables)."""
        self.environment = environment
        self.judge = judge
        self._python: dict[str, Callable] = dict(plugins or {})
        self._device: DeviceProfile | None = None
        for spec in self._specs():
            if spec.kind == "judge" and judge is None:
                raise ValueError(
                    f"environment '{environment.name}': a judge verifier needs a "
                    f"VLM backend (configure one, or choose another verifier)"
                )

    def _specs(self) -> list[VerifierSpec]:
        env = self.environment
        specs = [env.verifier, env.explore.verifier if env.explore else None]
        specs += [t.verifier for t in env.tasks]
        return [s for s in specs if s is not None]

    @property
    def name(self) -> str:
        return self.environment.name

    def verifier_for(self, task: Task) -> VerifierSpec | None:
        return self.environment.verifier_for(task)

    def values(self, task: Task, *, session: str, seed: int, device: DeviceProfile | None = None) -> dict:
        """What the placeholders are filled with: a task's own params.seed wins."""
        device = device or self._device
        return dict(
            seed=int(task.params.get("seed", seed)),
            task_id=task.task_id,
            session=session,
            language=task.language,
            app=task.app,
            theme=device.theme if device else None,
            font_scale=device.font_scale if device else None,
        )

    def where(self, task: Task, what: str) -> str:
        return f"environment '{self.name}', task '{task.task_id}', {what}"

    # ------------------------------------------------------------------ start
    def start_url(self, task: Task, *, session: str, seed: int) -> str:
        """Where the episode starts: a URL, or for a native app its package/activity or
        bundle id (the env launches it)."""
        if self.environment.platform == "desktop":
            return f"desktop://{self.environment.name}"  # the env launches the app itself
        app = self.environment.app
        if app is not None and not task.start_url:
            if app.package:
                return f"{app.package}/{app.activity}" if app.activity else app.package
            return app.bundle_id
        url = task.start_url or self.environment.start_url
        if not url:
            raise StartPageError(self.where(task, "start_url") + ": none given")
        if task.start_url and self.environment.start_url and "://" not in task.start_url:
            url = urljoin(self.environment.start_url, task.start_url)  # a path of the app
        return fill(url, **self.values(task, session=session, seed=seed))

    def start(
        self, env, task: Task, *, session: str, seed: int, device: DeviceProfile
    ) -> tuple[Observation, Task]:
        """Reset `env` to the task's start page, run setup; (first observation, task).

        The task comes back with its instruction read from the page when the
        environment has `instruction_js` and the task has no instruction of its own.
        """
        self._device = device
        url = self.start_url(task, session=session, seed=seed)
        env_file = self.environment
        values = self.values(task, session=session, seed=seed)
        hooks = getattr(env, "context_hooks", None)
        frozen = env_file.freeze_time
        hook = None
        if hooks is not None and frozen is not None:

            def hook(context) -> None:
                context.clock.set_fixed_time(frozen)

            hooks.append(hook)
        try:
            obs = env.reset(url, device=device, how=env_file.reset, task=task, values=values)
        finally:
            if hook is not None:
                hooks.remove(hook)
        if env_file.platform == "desktop":
            return obs, task  # the desktop env ran setup, launch and wait_for: they come before the app
        if obs.last_action_error:
            raise StartPageError(
                f"{self.where(task, 'start_url')}: the start page {url} did not load: {obs.last_action_error}"
            )
        page = web_page(env)
        if page is not None:
            status = self._evaluate(page, _STATUS_JS, None, task, "start page status")
            if isinstance(status, int) and status >= 400:
                raise StartPageError(
                    f"{self.where(task, 'start_url')}: the start page {url} answered HTTP {status}"
                )
        if env_file.setup:
            self._run_setup(env, fill(env_file.setup, **values), task)
        if env_file.wait_for:
            self._wait_for(env, fill(env_file.wait_for, **values), task)
        spec = env_file.task_spec(task.task_id)
        needs_instruction = env_file.instruction_js and (spec is None or spec.instruction is None)
        if needs_instruction:
            text = self._evaluate(
                page_of(env), fill(env_file.instruction_js, **values), None, task, "instruction_js"
            )
            if not isinstance(text, str) or not text.strip():
                raise SetupError(
                    self.where(task, "instruction_js") + f": gave {text!r}, expected a non-empty string"
                )
            task = task.model_copy(update={"instruction": " ".join(text.split())})
        if env_file.setup or env_file.wait_for or needs_instruction:
            obs = env.observe()
        return obs, task

    def _run_setup(self, env, script: str, task: Task) -> None:
        if web_page(env) is None and self.environment.app is not None:
            return self._deep_link(env, script, task)
        page = page_of(env)
        try:
            page.evaluate(script)
        except Exception as e:  # noqa: BLE001 - a setup that navigates destroys its own context
            if "context was destroyed" not in str(e) and "navigat" not in str(e):
                raise SetupError(self.where(task, "setup") + f": {_short(e)}") from e
        try:
            page.wait_for_load_state("domcontentloaded", timeout=self.environment.wait_timeout_s * 1000)
        except Exception as e:  # noqa: BLE001
            raise SetupError(
                self.where(task, "setup") + f": the page did not load after setup: {_short(e)}"
            ) from e

    def _deep_link(self, env, link: str, task: Task) -> None:
        """A native app's setup: open the deep link in the app (Appium's mobile: deepLink)."""
        app = self.environment.app
        args = {"url": link.strip()}
        args.update({"package": app.package} if app.package else {"bundleId": app.bundle_id})
        try:
            env.driver.execute_script("mobile: deepLink", args)
        except Exception as e:  # noqa: BLE001
            raise SetupError(self.where(task, "setup") + f": deep link {link!r}: {_short(e)}") from e

    def _wait_native(self, env, condition: str, task: Task) -> None:
        """wait_for in a native app: an XPath ("//...") or an accessibility id."""
        by = "xpath" if condition.lstrip().startswith(("/", "(")) else "accessibility id"
        deadline = time.monotonic() + self.environment.wait_timeout_s
        while time.monotonic() < deadline:
            try:
                if env.driver.find_elements(by, condition):
                    return
            except Exception:  # noqa: BLE001 - the app is still starting
                pass
            time.sleep(0.25)
        raise SetupError(
            self.where(task, "wait_for") + f" {condition!r} ({by}): not found "
            f"within {self.environment.wait_timeout_s}s"
        )

    def _wait_for(self, env, condition: str, task: Task) -> None:
        if web_page(env) is None and self.environment.app is not None:
            return self._wait_native(env, condition, task)
        try:
            wait_for_condition(page_of(env), condition, self.environment.wait_timeout_s)
        except TimeoutError as e:
            raise WaitForTimeout(f"{self.where(task, 'wait_for')} {e}") from e

    def _evaluate(self, page, expression: str, arg: Any, task: Task, what: str) -> Any:
        try:
            return page.evaluate(expression, arg) if arg is not None else page.evaluate(expression)
        except Exception as e:  # noqa: BLE001
            raise SetupError(self.where(task, what) + f": {_short(e)}") from e

    # ------------------------------------------------------------------ verify
    def verify(
        self,
        env,
        task: Task,
        obs: Observation,
        history: list[Step],
        *,
        final: bool,
        session: str,
        seed: int,
        memo: StateMemo | None = None,
    ) -> Verdict | None:
        """The verifier's verdict now; None when the task has no verifier (or not yet).
        `memo`: verdicts on one unchanged state share their probe reads (env_probes)."""
        spec = self.verifier_for(task)
        if spec is None or (not final and not spec.every_step):
            return None
        where = self.where(task, f"{spec.kind} verifier")
        started = time.perf_counter()
        try:
            value = self._ask(spec, env, task, obs, history, session=session, seed=seed, memo=memo)
        except VerifierError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever a user's verifier raises
            raise VerifierError(f"{where}: raised {type(e).__name__}: {_short(e)}") from e
        elapsed = time.perf_counter() - started
        if elapsed > spec.timeout_s:
            raise VerifierError(f"{where}: took {elapsed:.1f}s (timeout_s={spec.timeout_s})")
        return Verdict.coerce(value, spec.kind, where)

    def _ask(
        self,
        spec: VerifierSpec,
        env,
        task: Task,
        obs: Observation,
        history: list[Step],
        *,
        session: str,
        seed: int,
        memo: StateMemo | None = None,
    ) -> Any:
        values = self.values(task, session=session, seed=seed)
        if spec.kind == "js":
            return page_of(env).evaluate(bounded_js(fill(spec.expression, **values), spec.timeout_s), None)
        if spec.kind == "http":
            url = fill(spec.url, **values)
            try:
                body = self._fetch(spec, url, task)
            except HTTPStatusError as e:
                if e.status not in spec.not_done_status:
                    raise
                # What the task creates is not there (yet): not done, never an error.
                reason = f"GET {url} answered HTTP {e.status}: not done (not_done_status)"
                return {"done": False, "success": False, "reason": reason}
            if spec.expression:
                return page_of(env).evaluate(bounded_js(spec.expression, spec.timeout_s), body)
            return body
        if spec.kind in ("python", "state"):
            fn = self._python.get(spec.function) or load_callable(spec.function)
            self._python[spec.function] = fn
            kwargs = {k: v for k, v in (("session", session), ("seed", values["seed"])) if _accepts(fn, k)}
            if spec.kind == "state" and spec.url:
                kwargs["state"] = self._fetch(spec, fill(spec.url, **values), task)
            # On this thread: Playwright's sync API is bound to it. Its time is checked after.
            return fn(task, obs, history, env, **kwargs)
        if spec.kind == "judge":
            return self.judge(task, history, obs)
        if spec.kind == "command":
            return self._command(spec, env, task)
        if spec.kind == "predicates":
            return predicates_verdict(spec.predicates, self.environment.probes, env, obs, values, memo)
        raise VerifierError(f"unknown verifier kind {spec.kind!r}")

    def probe_values(self, env, task: Task, *, session: str, seed: int) -> dict[str, Any]:
        """The environment's probes read now (those that can be), for a walk's record."""
        values = self.values(task, session=session, seed=seed)
        return read_probes(self.environment.probes, env, values)

    def _command(self, spec: VerifierSpec, env, task: Task) -> Any:
        """A command verifier: JSON on stdout is the verdict, else the exit status says."""
        run = getattr(env, "run_command", None)
        if run is None:
            raise VerifierError(self.where(task, "command verifier") + ": the env is not a desktop session")
        status, out, err = run(spec.run, timeout_s=spec.timeout_s)
        text = out.strip()
        if text.startswith("{"):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                pass  # not a verdict: the status says
        tail = (err.strip() or text).splitlines()[-1:] or [""]
        reason = f"{spec.run!r} exited with status {status}" + (f": {tail[0][:300]}" if tail[0] else "")
        return {"done": status == 0, "success": status == 0, "reason": reason}

    def _fetch(self, spec: VerifierSpec, url: str, task: Task) -> Any:
        where = self.where(task, "http verifier")
        req = urllib.request.Request(url, headers={"Accept": "application/json", **spec.headers})
        try:
            with urllib.request.urlopen(req, timeout=spec.timeout_s) as resp:
                raw = resp.read(10_000_000).decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            raise HTTPStatusError(f"{where}: GET {url} answered HTTP {e.code}", e.code) from e
        except (urllib.error.URLError, OSError) as e:
            raise VerifierError(f"{where}: GET {url} failed: {e}") from e
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            if spec.expression:
                return raw  # the expression reads text
            raise VerifierError(
                f"{where}: GET {url} did not answer JSON (give an 'expression' to read it): {raw[:120]!r}"
            ) from None


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__
