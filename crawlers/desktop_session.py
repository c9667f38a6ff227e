"""One desktop session: its own X server, D-Bus session (with the AT-SPI bus), HOME and apps.

Nothing is shared between two sessions: `Xvfb -displayfd` picks a free display
number, a `dbus-daemon` of the session's own carries the accessibility bus the
apps register on (at-spi-bus-launcher is activated through it), and HOME,
XDG_RUNTIME_DIR and the temp folder live in a folder of the session that a
reset replaces (a fresh profile per episode).

Every process the session starts runs in a process group of its own and
carries the session's token in its environment (TRAJFORGE_DESKTOP_SESSION,
"<owner pid>.<random>": the owner's sessions can be told from other processes'),
so `close()` finds and kills them all, the ones D-Bus activated too, even
after a failure: no X server, bus or app is left behind.
"""

from __future__ import annotations

import functools
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from schemas.environment import DESKTOP_ROOT_PREFIX

TOKEN_VAR = "TRAJFORGE_DESKTOP_SESSION"
_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 3.0


class DesktopSessionError(RuntimeError):
    """The X server, the bus or an app of a desktop session could not be started."""


# The one service the session's bus may start: the accessibility bus. The default session
# configuration activates whatever the machine installed (xdg-desktop-portal and its
# backends, dconf, printing): each session would start other processes on each machine.
A11Y_SERVICE = "org.a11y.Bus.service"
_SERVICE_DIRS = ("/usr/share/dbus-1/services", "/usr/local/share/dbus-1/services")
_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir={tmp}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{services}</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def _write_bus_config(root: Path) -> Path:
    """A session bus configuration whose only activatable service is the accessibility bus."""
    found = [Path(d) / A11Y_SERVICE for d in _SERVICE_DIRS if (Path(d) / A11Y_SERVICE).is_file()]
    if not found:
        raise DesktopSessionError(
            f"no {A11Y_SERVICE} in {' or '.join(_SERVICE_DIRS)}: install at-spi2-core (the accessibility bus)"
        )
    services = root / "bus-services"
    services.mkdir(exist_ok=True)
    shutil.copyfile(found[0], services / A11Y_SERVICE)
    config = root / "session-bus.conf"
    config.write_text(_BUS_CONFIG.format(tmp=tempfile.gettempdir(), services=services), encoding="utf-8")
    return config


def _read_line(fd: int, timeout_s: float, what: str, proc: subprocess.Popen) -> str:
    """A line a child writes to `fd` (a display number, a bus address), bounded in time."""
    deadline = time.monotonic() + timeout_s
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DesktopSessionError(f"{what} did not start within {timeout_s:g} s")
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
        elif proc.poll() is not None:
            raise DesktopSessionError(f"{what} exited at once (status {proc.returncode})")
    if b"\n" not in buf:
        try:
            status = proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            raise DesktopSessionError(f"{what} closed its pipe before saying where it listens") from None
        raise DesktopSessionError(f"{what} exited at once (status {status})")
    return buf.split(b"\n", 1)[0].decode().strip()


class DesktopSession:
    """An X display, a D-Bus session and a HOME of their own; apps launched into them."""

    def __init__(self, *, width: int = 1280, height: int = 800, dpi: int = 96):
        self.width, self.height, self.dpi = width, height, dpi
        # "<pid of the process that owns the session>.<random>": whose sessions these are.
        self.token = f"{os.getpid()}.{secrets.token_hex(8)}"
        self.root = Path(tempfile.mkdtemp(prefix=DESKTOP_ROOT_PREFIX))
        self.procs: list[subprocess.Popen] = []
        self.display: str | None = None
        self.bus_address: str | None = None
        self.home = self.root / "home"
        self._closed = False
        try:
            (self.root / "run").mkdir(mode=0o700)  # the buses' sockets: kept across episodes
            self._start_x()
            self._start_bus()
            self.fresh_home()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ start
    def _spawn(self, argv: list[str], *, env: dict | None = None, pass_fds=(), **kw) -> subprocess.Popen:
        env = dict(env if env is not None else os.environ)
        env[TOKEN_VAR] = self.token
        proc = subprocess.Popen(
            argv, env=env, pass_fds=pass_fds, start_new_session=True, stdin=subprocess.DEVNULL, **kw
        )
        self.procs.append(proc)
        return proc

    def _start_x(self) -> None:
        if shutil.which("Xvfb") is None:
            raise DesktopSessionError("Xvfb is not installed (run scripts/setup_desktop.sh)")
        r, w = os.pipe()
        try:
            argv = ["Xvfb", "-displayfd", str(w), "-screen", "0", f"{self.width}x{self.height}x24"]
            argv += ["-dpi", str(self.dpi), "-nolisten", "tcp", "-noreset"]
            log = self.root / "xvfb.log"
            with open(log, "wb") as out:
                proc = self._spawn(argv, pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=out)
            os.close(w)
            w = -1
            try:
                self.display = ":" + _read_line(r, _START_TIMEOUT_S, "Xvfb", proc)
            except DesktopSessionError as e:
                said = [ln for ln in log.read_text("utf-8", "replace").splitlines() if ln.strip()][-2:]
                raise DesktopSessionError(f"{e}{'; it said: ' + ' | '.join(said) if said else ''}") from None
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

    def _start_bus(self) -> None:
        r, w = os.pipe()
        try:
            config = _write_bus_config(self.root)
            argv = [
                "dbus-daemon",
                f"--config-file={config}",
                "--nofork",
                "--nopidfile",
                f"--print-address={w}",
            ]
            proc = self._spawn(
                argv,
                env=self._base_env(),
                pass_fds=(w,),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            os.close(w)
            w = -1
            self.bus_address = _read_line(r, _START_TIMEOUT_S, "dbus-daemon", proc)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)

    def fresh_home(self) -> Path:
        """An empty HOME (and temp folder) for the next episode."""
        for name in ("home", "tmp"):
            shutil.rmtree(self.root / name, ignore_errors=True)
            (self.root / name).mkdir(mode=0o700)
        return self.home

    def _base_env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(
            HOME=str(self.home),
            XDG_RUNTIME_DIR=str(self.root / "run"),
            TMPDIR=str(self.root / "tmp"),
            DISPLAY=self.display or "",
            # The apps' settings in memory: no dconf service to start (or to leave behind).
            GSETTINGS_BACKEND="memory",
            # Every toolkit exposes its tree on the session's accessibility bus.
            NO_AT_BRIDGE="0",
            ACCESSIBILITY_ENABLED="1",
            GTK_MODULES="gail:atk-bridge",
            # File choosers and the like in the app's own process, never a desktop portal's.
            GTK_USE_PORTAL="0",
            QT_ACCESSIBILITY="1",
            QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1",
        )
        env[TOKEN_VAR] = self.token
        return env

    @property
    def environ(self) -> dict[str, str]:
        """The environment of a process in this session (its DISPLAY, HOME and bus)."""
        env = self._base_env()
        if self.bus_address:
            env["DBUS_SESSION_BUS_ADDRESS"] = self.bus_address
        return env

    def launch(
        self, argv: list[str] | str, *, log: Path | None = None, network_off: bool = False
    ) -> subprocess.Popen:
        """Start an app in the session (a list, or a shell command line); with `network_off`,
        in a network namespace of its own (network_off_prefix)."""
        if isinstance(argv, str):
            argv = ["/bin/sh", "-c", argv]
        if shutil.which(argv[0], path=self.environ.get("PATH")) is None:
            raise DesktopSessionError(f"cannot start {argv[0]!r}: no such program")
        if network_off:
            argv = network_off_prefix() + argv
        out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            return self._spawn(argv, env=self.environ, cwd=str(self.home), stdout=out, stderr=out)
        except OSError as e:
            raise DesktopSessionError(f"cannot start {argv[0]!r}: {e}") from e
        finally:
            if log is not None:
                out.close()

    def run(self, command: str, *, timeout_s: float, extra_env: dict | None = None) -> tuple[int, str, str]:
        """Run a shell command in the session; (status, stdout, stderr). TimeoutError past
        `timeout_s` (its process group is killed first)."""
        env = {**self.environ, **(extra_env or {})}
        proc = self._spawn(
            ["/bin/sh", "-c", command],
            env=env,
            cwd=str(self.home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.communicate()
            raise TimeoutError(f"{command!r} did not finish within {timeout_s:g} s") from None
        finally:
            if proc in self.procs:
                self.procs.remove(proc)
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    # ------------------------------------------------------------------ stop
    def kill_apps(self, spare: tuple[int, ...] = ()) -> None:
        """Kill every process of the session but its X server and bus (an episode's apps)
        and the `spare` ones (the accessibility reader, kept across episodes)."""
        keep = {p.pid for p in self.procs[:2]} | set(spare)
        victims = self._app_pids(keep)
        for proc in self.procs[2:]:
            if proc.pid not in keep:
                _kill_group(proc.pid)
        for pid in victims:
            _kill(pid)
        for proc in self.procs[2:]:
            if proc.pid not in keep:
                _reap(proc)
        self.procs = self.procs[:2] + [p for p in self.procs[2:] if p.pid in keep]
        # Gone, not only signalled: a single-instance app (a GApplication) started next
        # would otherwise find its bus name still held and hand itself to the dying one.
        # (A dying process's environment is unreadable before its sockets close: the
        # victims are waited for by pid.)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while any(_running(pid) for pid in victims) and time.monotonic() < deadline:
            time.sleep(0.02)
        self._bus_round_trip()

    def _bus_round_trip(self) -> None:
        """A call answered by the session's bus: it has seen the killed apps' sockets close
        (and freed their names) before it answers a later one."""
        if shutil.which("dbus-send") is None or not self.bus_address:
            return
        call = "dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId"
        try:
            self.run(call + " >/dev/null", timeout_s=_STOP_TIMEOUT_S)
        except TimeoutError:
            pass  # a hung bus: the next launch's wait says so

    def _app_pids(self, keep: set[int]) -> list[int]:
        return [pid for pid in self.pids() if pid not in keep and not self._is_bus_child(pid)]

    def _is_bus_child(self, pid: int) -> bool:
        """The accessibility bus D-Bus started (at-spi-bus-launcher and its bus) stays."""
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return False
        return exe.endswith(("at-spi-bus-launcher", "dbus-daemon", "at-spi2-registryd"))

    def pids(self) -> list[int]:
        """Every live process that carries this session's token."""
        marker = f"{TOKEN_VAR}={self.token}".encode()
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        out.append(int(entry))
            except OSError:
                continue
        return out

    def close(self) -> None:
        """Kill everything the session started (apps, bus, X server) and remove its folder."""
        if self._closed:
            return
        self._closed = True
        for proc in reversed(self.procs):
            _kill_group(proc.pid)
        for _ in range(3):  # what D-Bus activated, in groups of their own
            left = self.pids()
            if not left:
                break
            for pid in left:
                _kill(pid)
            time.sleep(0.05)
        for proc in self.procs:
            _reap(proc)
        self.procs = []
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> DesktopSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:  # our own child: reap it (others are reaped by their parent or init)
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _running(pid: int) -> bool:
    """Alive, or a zombie whose other threads still run: a killed process's files and
    sockets (its bus connection) are closed by its last thread, and the thread-group
    leader can be a zombie before the others have gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state not in (b"Z", b"X"):
        return True
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


@functools.cache
def network_off_prefix() -> list[str]:
    """The prefix that starts a command in a network namespace of its own: only a loopback
    that is down, so nothing (not even this machine's loopback) is reachable, while the X
    server and the buses, reached through socket files, still are. `unshare -n` where this
    process may (root), else in a user namespace (`unshare -rn`); DesktopSessionError when
    the machine allows neither."""
    tried = []
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        try:
            done = subprocess.run(prefix + ["true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            tried.append(f"{shlex.join(prefix)}: {e}")
            continue
        if done.returncode == 0:
            return prefix
        tried.append(f"{shlex.join(prefix)}: {done.stderr.decode('utf-8', 'replace').strip()}")
    raise DesktopSessionError(
        "network: off needs a network namespace for the app and this machine gives none ("
        + "; ".join(tried)
        + "): run as root or allow unprivileged user namespaces, or list the origins the app"
        " may reach under `network`"
    )


def _reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
