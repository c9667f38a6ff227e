"""The desktop environment: a Linux app on its own X server, with WebEnv's interface.

`DesktopEnv` is what the crawl loop and the Gym API drive for `platform:
desktop` environment files (reset / step / observe / is_alive / restart /
close_episode / close): one `DesktopSession` (crawlers.desktop_session: X
server, D-Bus and accessibility bus, HOME) per env, never shared.

An episode (`reset`): the previous app is killed, HOME is replaced by an empty
one, `setup` runs (shell commands or "module:function"), `launch` starts the
app (with `network: off`, the default, in a network namespace of its own: it
reaches the session's X server and buses, nothing on the network), `wait_for`
holds (a window title, an accessibility node, a shell condition; by default the
app's first window), and the app's first window is
made to fill the screen (there is no window manager to maximise it). A launch
that exits at once, or an app that shows no window in time, is an
`AppStartError`; an app that dies mid-episode, or an accessibility bus that
stops answering, an `AppCrashed` (a BrowserCrashed: the crawl retries the
episode on a fresh session and records an `error` if it keeps failing).

Observations: the X server's pixels and the AT-SPI tree (crawlers.desktop_tree)
in the web's element form. Actions: the unified action space through XTEST
(crawlers.desktop_input); a failed action is `last_action_error`, never a raise.
"""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import time
from pathlib import Path

from PIL import Image

from schemas.actions import Action, ActionType
from schemas.environment import Commands, DesktopWaitFor, Environment, ResetSpec
from schemas.observation import Observation
from schemas.records import DeviceProfile, Task

from .desktop_input import InputError, XScreen
from .desktop_session import DesktopSession, DesktopSessionError
from .desktop_tree import TreeReader, TreeTimeout, normalise_tree
from .web_errors import ActionError, BrowserCrashed

_DEFAULT_LONG_PRESS_MS = 800
_DEFAULT_SWIPE_MS = 300
_DEFAULT_WAIT_MS = 500
_DEFAULT_SCROLL_NOTCHES = 5
_SETTLE_MIN_S = 0.08
_SETTLE_MAX_S = 1.5
_POLL_S = 0.15
_EXIT_WAIT_S = 2.0  # an app with no window left after an input: how long it may take to exit
# Actions that send the app no input: an exit after one is the app's own doing.
_NO_INPUT = (ActionType.WAIT, ActionType.DONE, ActionType.ANSWER, ActionType.TAKE_OVER)


class AppStartError(RuntimeError):
    """The desktop app did not start: its launch failed or exited, or no window came."""


class AppCrashed(BrowserCrashed):
    """The desktop app (or its session's X server / accessibility bus) is gone mid-episode."""


def _argv(command: Commands) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


class DesktopEnv:
    """One desktop session playing one environment's app (see the module doc)."""

    platform = "desktop"

    def __init__(
        self,
        environment: Environment,
        *,
        image_format: str = "png",
        wait_timeout_s: float | None = None,
        step_timeout_s: float = 10.0,
    ):
        if environment.platform != "desktop":
            raise ValueError(f"environment '{environment.name}' is {environment.platform}, not desktop")
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format={image_format!r}: expected 'png' or 'jpeg'")
        self.environment = environment
        self.image_format = image_format
        self.wait_timeout_s = wait_timeout_s or environment.wait_timeout_s
        self.step_timeout_s = step_timeout_s
        self.blocked_requests: list[str] = []
        self.device: DeviceProfile | None = None
        self.session: DesktopSession | None = None
        self.screen: XScreen | None = None
        self.reader: TreeReader | None = None
        self.app = None  # the launched process
        self.task: Task | None = None
        self.values: dict = {}
        self.tree_ms: list[float] = []  # accessibility-tree read time per observation
        self._closed = False

    # ------------------------------------------------------------------ life cycle
    def _open_session(self) -> None:
        d = self.environment.display
        w, h, dpi = (d.width, d.height, d.dpi) if d else (1280, 800, 96)
        try:
            self.session = DesktopSession(width=w, height=h, dpi=dpi)
            self.screen = XScreen(self.session.display)
        except (DesktopSessionError, OSError, InputError) as e:
            self._close_session()
            raise AppCrashed(f"the desktop session did not start: {e}") from e
        except BaseException:
            self._close_session()
            raise
        self.reader = TreeReader(self.session.environ, timeout_s=self.step_timeout_s)

    def _close_session(self) -> None:
        for part in (self.reader, self.screen, self.session):
            if part is not None:
                part.close()
        self.reader = self.screen = self.session = None
        self.app = None

    def is_alive(self) -> bool:
        if self._closed or self.session is None or self.screen is None:
            return False
        x = self.session.procs[0] if self.session.procs else None
        return x is not None and x.poll() is None

    def restart(self) -> None:
        if self._closed:
            raise RuntimeError("this DesktopEnv is closed")
        self._close_session()
        self._open_session()

    def close_episode(self) -> None:
        """Teardown commands, then the episode's apps killed (the X server and bus stay)."""
        if self.session is None:
            return
        try:
            if self.environment.teardown and self.task is not None:
                self._run_commands(self.environment.teardown, "teardown")
        finally:
            # The reader stays: starting it again (Python, GObject, AT-SPI) would cost each reset.
            reader = self.reader.proc if self.reader is not None else None
            self.session.kill_apps(spare=(reader.pid,) if reader is not None else ())
            self.app = None

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.close_episode()
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        self._close_session()
        self._closed = True

    def __enter__(self) -> DesktopEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ episode
    def reset(
        self,
        url: str,
        device: DeviceProfile | None = None,
        *,
        how: ResetSpec | None = None,
        task: Task | None = None,
        values: dict | None = None,
    ) -> Observation:
        """A fresh episode: app killed, fresh HOME, setup, launch, wait_for; observe.

        `url` is the app's (`desktop://<environment>`: the environment names what is
        launched); `how` is a browser's (a desktop always starts the app afresh);
        `task` and `values` fill the setup and verifier commands.
        """
        if self._closed:
            raise RuntimeError("this DesktopEnv is closed")
        if not self.is_alive():
            self.restart()
        self.close_episode()
        self.task, self.values = task, dict(values or {})
        self.session.fresh_home()
        if self.environment.setup:
            self._run_commands(self.environment.setup, "setup")
        try:
            self.app = self.session.launch(
                _argv(self.environment.launch),
                log=self._log_path(),
                network_off=self.environment.network == "off",
            )
        except DesktopSessionError as e:
            raise AppStartError(str(e)) from None
        self._wait_started()
        self.device = self._device(device)
        return self.observe()

    def _device(self, device: DeviceProfile | None) -> DeviceProfile:
        s = self.session
        base = device or DeviceProfile(name="desktop", viewport_width=s.width, viewport_height=s.height)
        return base.model_copy(
            update={"viewport_width": s.width, "viewport_height": s.height, "is_mobile": False}
        )

    def _log_path(self) -> Path:
        return self.session.root / "app.log"

    def _app_log(self) -> str:
        try:
            text = self._log_path().read_text("utf-8", "replace").strip()
        except OSError:
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()][-3:]
        return ("; its output: " + " | ".join(lines))[:600] if lines else ""

    def _launch_text(self) -> str:
        launch = self.environment.launch
        return launch if isinstance(launch, str) else shlex.join(launch)

    def _wait_started(self) -> None:
        """Wait for `wait_for` (default: the app's first window), bounded."""
        cond = self.environment.wait_for
        deadline = time.monotonic() + self.wait_timeout_s
        last = None
        while True:
            status = self.app.poll()
            if status not in (None, 0):
                raise AppStartError(
                    f"launch {self._launch_text()!r} exited at once with status {status}{self._app_log()}"
                )
            try:
                answer = self.reader.read()
                if self._holds(cond, answer):
                    self._fill_screen()
                    return
                last = None
            except TreeTimeout as e:
                if "did not answer" in str(e):  # a hung bus: the session, not the app, is at fault
                    raise AppCrashed(f"launch {self._launch_text()!r}: {e}") from e
                last = str(e)
            except TimeoutError as e:
                last = str(e)
            if time.monotonic() > deadline:
                what = _describe(cond)
                exited = f"; the launched process exited (status {status})" if status is not None else ""
                why = f" (last error: {last})" if last else ""
                raise AppStartError(
                    f"launch {self._launch_text()!r}: {what} did not appear within "
                    f"{self.wait_timeout_s:g} s{exited}{why}{self._app_log()}"
                )
            time.sleep(_POLL_S)

    def _holds(self, cond: DesktopWaitFor | None, answer: dict) -> bool:
        wins = _windows(answer)
        if cond is None:
            return bool(wins)
        if cond.window is not None:
            return any(cond.window.lower() in (w.get("name") or "").lower() for w in wins)
        if cond.run is not None:
            status, _, _ = self.session.run(
                self._filled(cond.run), timeout_s=self.wait_timeout_s, extra_env=self._task_env()
            )
            return status == 0
        return _find_node(answer, cond.role, cond.name)

    def _fill_screen(self) -> None:
        self.screen.maximise_first()
        time.sleep(0.3)  # the toolkit lays the window out again

    # ------------------------------------------------------------------ steps
    def step(self, action: Action) -> Observation:
        self._require()
        error = None
        try:
            before = self._pixels()
            self._act(action)
            if action.type not in (ActionType.ANSWER, ActionType.DONE, ActionType.TAKE_OVER, ActionType.WAIT):
                self._settle(before)
        except (ActionError, InputError) as e:
            error = f"{action.type.value}: {e}"
        return self.observe(error, acted=action.type not in _NO_INPUT)

    def observe(self, error: str | None = None, *, acted: bool = False) -> Observation:
        """The screen now. `acted`: an input action came just before (a step's), so an app
        that exited by itself after it was closed by it (Quit, Cancel): the observation
        says so (`app_exit`) and the episode ends. An exit with no input before it, or a
        death by a signal, is the environment's failure (AppCrashed)."""
        self._require()
        pixels, answer = self._capture()
        exited = None
        if self.app is not None and not _windows(answer):
            # A closing app unmaps its windows a moment before its process ends.
            exited = self._exit_status(_EXIT_WAIT_S if acted else 0.0)
        if exited is not None:
            if not acted or _by_signal(exited):
                raise AppCrashed(
                    f"the app exited mid-episode (launch {self._launch_text()!r}, status {exited})"
                    f"{self._app_log()}"
                )
        h, w = pixels.shape[:2]
        # The session's folder differs per session: shown as ~ so that replays compare equal.
        answer = json.loads(json.dumps(answer).replace(json.dumps(str(self.session.home))[1:-1], "~"))
        tree, elements, roots = normalise_tree(answer, w, h, self.screen.stacking_titles())
        title = next((n.name for n in reversed(roots) if n.role in ("window", "dialog")), "")
        return Observation(
            screenshot=self._encode(pixels),
            image_format=self.image_format,
            width=w,
            height=h,
            url=f"desktop://{self.environment.name}/{title}",
            a11y_tree=tree,
            elements=elements,
            last_action_error=error,
            app_exit=exited,
        )

    def _exit_status(self, wait_s: float) -> int | None:
        """The app's exit status once it has exited, waiting up to `wait_s`; None while it runs."""
        try:
            return self.app.wait(timeout=wait_s) if wait_s > 0 else self.app.poll()
        except subprocess.TimeoutExpired:
            return None

    def _capture(self):
        """The screen's pixels and tree. A window the tree shows off the screen (mapped
        after the last fit) is fitted and both are taken again (bounded)."""
        deadline = time.monotonic() + _SETTLE_MAX_S
        while True:
            try:
                self._fit_windows()
            except Exception as e:  # noqa: BLE001 - the X connection broke
                raise AppCrashed(f"the X server stopped answering: {e}") from e
            pixels = self._pixels()
            t0 = time.perf_counter()
            try:
                answer = self._read_tree()
            except TreeTimeout as e:
                raise AppCrashed(f"{e} (app {self._launch_text()!r})") from e
            read_ms = (time.perf_counter() - t0) * 1000
            if not _off_screen(answer, self.screen.width, self.screen.height) or time.monotonic() > deadline:
                self.tree_ms.append(read_ms)
                return pixels, answer

    def _fit_windows(self) -> None:
        """A new dialog off the screen's edge is moved in, until it stays in (bounded): a
        toolkit may first put it back where it wanted it, and its boxes follow late."""
        if not self.screen.fit_windows():
            return
        deadline = time.monotonic() + _SETTLE_MAX_S
        while time.monotonic() < deadline:
            time.sleep(_POLL_S)
            if not self.screen.fit_windows():
                break
        self._settle(None)

    def _read_tree(self) -> dict:
        """The tree; asked twice when an app went away under the first read (a closing dialog)."""
        try:
            return self.reader.read()
        except TreeTimeout as e:
            if "did not answer" in str(e):
                raise  # a hung bus: waiting again would double the wait
            time.sleep(_POLL_S)
            return self.reader.read()

    def _require(self) -> None:
        if self._closed:
            raise RuntimeError("this DesktopEnv is closed")
        if not self.is_alive():
            raise AppCrashed("the desktop session's X server is gone; call restart()")

    def _pixels(self):
        try:
            return self.screen.screenshot()
        except Exception as e:  # noqa: BLE001 - the X connection broke: the server died
            raise AppCrashed(f"the X server stopped answering: {e}") from e

    def _encode(self, pixels) -> bytes:
        out = io.BytesIO()
        img = Image.fromarray(pixels)
        if self.image_format == "jpeg":
            img.save(out, "JPEG", quality=85)
        else:
            img.save(out, "PNG", compress_level=1)
        return out.getvalue()

    def _settle(self, before) -> None:
        """Until two screenshots in a row are the same (bounded): the app has drawn."""
        time.sleep(_SETTLE_MIN_S)
        deadline = time.monotonic() + _SETTLE_MAX_S
        last = self._pixels()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = self._pixels()
            if (now == last).all():
                return
            last = now

    def _px(self, x: float | None, y: float | None) -> tuple[int, int]:
        if x is None or y is None:
            return self.screen.width // 2, self.screen.height // 2
        w, h = self.screen.width, self.screen.height
        return min(max(round(x * w), 0), w - 1), min(max(round(y * h), 0), h - 1)

    def _act(self, a: Action) -> None:
        s, t = self.screen, a.type
        if t == ActionType.TAP:
            s.click(*self._px(a.x, a.y))
        elif t == ActionType.DOUBLE_TAP:
            s.click(*self._px(a.x, a.y), count=2)
        elif t == ActionType.RIGHT_CLICK:
            s.click(*self._px(a.x, a.y), button=3)
        elif t == ActionType.LONG_PRESS:
            ms = a.duration_ms if a.duration_ms is not None else _DEFAULT_LONG_PRESS_MS
            s.click(*self._px(a.x, a.y), hold_s=ms / 1000)
        elif t == ActionType.SWIPE:
            ms = a.duration_ms if a.duration_ms is not None else _DEFAULT_SWIPE_MS
            s.drag(*self._px(a.x, a.y), *self._px(a.x2, a.y2), ms=ms)
        elif t == ActionType.SCROLL:
            s.wheel(*self._px(a.x, a.y), a.direction, int(a.amount or _DEFAULT_SCROLL_NOTCHES))
        elif t == ActionType.TYPE:
            if a.x is not None:
                s.click(*self._px(a.x, a.y))
            s.type_text(a.text)
        elif t == ActionType.KEY:
            s.key(a.text.strip())
        elif t in (ActionType.BACK, ActionType.HOME):
            raise ActionError(f"a desktop has no {t.value} button: press a key (escape, alt+left)")
        elif t == ActionType.OPEN_APP:
            raise ActionError("open_app: a desktop episode plays the app its environment launches")
        elif t == ActionType.SELECT:
            raise ActionError("select: click the control, then the option")
        elif t == ActionType.WAIT:
            time.sleep((a.duration_ms if a.duration_ms is not None else _DEFAULT_WAIT_MS) / 1000)

    # ------------------------------------------------------------------ commands
    def _filled(self, text: str) -> str:
        from schemas.environment import fill

        return fill(text, **self.values) if self.values else text

    def _task_env(self) -> dict[str, str]:
        task = self.task
        if task is None:
            return {}
        env = {"TASK_ID": task.task_id, "TASK_LANGUAGE": task.language}
        env["TASK_PARAMS"] = json.dumps(task.params, ensure_ascii=False)
        for k, v in task.params.items():
            if isinstance(v, (str, int, float, bool)) and k.isidentifier():
                env[f"TASK_PARAM_{k.upper()}"] = str(v)
        return env

    def _run_commands(self, commands: Commands, what: str) -> None:
        from .env_runtime import SetupError, load_callable

        for cmd in [commands] if isinstance(commands, str) else commands:
            if _is_dotted(cmd):
                try:
                    load_callable(cmd)(self.session, self.task)
                except Exception as e:  # noqa: BLE001
                    raise SetupError(f"{what} {cmd}: {type(e).__name__}: {e}") from e
                continue
            try:
                status, out, err = self.session.run(
                    self._filled(cmd), timeout_s=self.wait_timeout_s, extra_env=self._task_env()
                )
            except TimeoutError as e:
                raise SetupError(f"{what} {e}") from e
            if status != 0:
                detail = (err or out).strip().splitlines()[-1:] or [""]
                raise SetupError(f"{what} {cmd!r} exited with status {status}: {detail[0][:300]}")

    def run_command(self, command: str, *, timeout_s: float) -> tuple[int, str, str]:
        """A command verifier's shell command in the session (its DISPLAY, HOME, task params)."""
        self._require()
        return self.session.run(self._filled(command), timeout_s=timeout_s, extra_env=self._task_env())


def _is_dotted(cmd: str) -> bool:
    import re

    return re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", cmd.strip()) is not None


def _by_signal(status: int) -> bool:
    """Killed by a signal: Popen's negative status, or a shell's 128 + the signal's number."""
    return status < 0 or status > 128


def _windows(answer: dict) -> list[dict]:
    return [w for app in answer.get("apps", []) for w in app.get("children") or []]


def _off_screen(answer: dict, width: int, height: int) -> bool:
    """Whether a window of the tree lies partly outside the screen."""
    for w in _windows(answer):
        box = w.get("box")
        if box and box[2] > 0 and box[3] > 0 and box[0] > -10_000:  # not AT-SPI's "no box"
            x, y, bw, bh = box
            if x < 0 or y < 0 or x + bw > width or y + bh > height:
                return True
    return False


def _find_node(answer: dict, role: str | None, name: str | None) -> bool:
    from .desktop_tree import _ROLES

    def match(n: dict) -> bool:
        r = n.get("role") or ""
        if role is not None and role not in (r, _ROLES.get(r)):
            return False
        # An entry's element name is its text when it has no label (crawlers.page_nodes).
        text = n.get("name") or n.get("value") or ""
        return name is None or name.lower() in text.lower()

    stack = list(answer.get("apps", []))
    while stack:
        n = stack.pop()
        if match(n) and n.get("role") != "application":
            return True
        stack.extend(n.get("children") or [])
    return False


def _describe(cond: DesktopWaitFor | None) -> str:
    if cond is None:
        return "no window of the app"
    if cond.window is not None:
        return f"wait_for window {cond.window!r}"
    if cond.run is not None:
        return f"wait_for run {cond.run!r} (exit 0)"
    return f"wait_for node role={cond.role!r} name={cond.name!r}"
