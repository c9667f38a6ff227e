"""What every benchmark shares: the result row, the machine, peak memory of a subprocess.

A benchmark module exposes `run(mode) -> list[Row]` (mode: "smoke", "quick"
or "full"); `benchmarks/run_all.py` runs each in its own process and renders
the rows as the table in docs/benchmarks.md. A row is one figure against a
baseline measured in the same run: on these shared 2-core machines only the
ratio is comparable between runs.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODES = ("smoke", "quick", "full")
_TARGET = re.compile(r"^\s*(>=|<=)\s*([0-9.]+)\s*$")


@dataclass
class Row:
    """One figure against its same-run baseline.

    `target` bounds the ratio (figure / baseline): ">= 0.8", "<= 1.25", or ""
    when the issue sets none. A row whose figure could not be measured keeps
    figure None and says why in `note` (e.g. "needs GPU, not run").
    """

    benchmark: str
    name: str
    figure: float | None
    baseline: float | None
    unit: str
    baseline_name: str
    target: str = ""
    note: str = ""
    machine: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target and not _TARGET.match(self.target):
            raise ValueError(f"row {self.name!r}: target {self.target!r} must read '>= x' or '<= x'")

    @property
    def baseline_broken(self) -> bool:
        """The baseline failed its sanity check (see `check_baseline`): no ratio is shown."""
        return self.note.startswith(BROKEN)

    @property
    def ratio(self) -> float | None:
        if self.figure is None or self.baseline is None or self.baseline == 0:
            return None
        return self.figure / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the ratio meets the target (None: no target or nothing measured)."""
        m = _TARGET.match(self.target) if self.target else None
        if m is None or self.ratio is None:
            return None
        bound = float(m.group(2))
        return self.ratio >= bound if m.group(1) == ">=" else self.ratio <= bound

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ratio"] = None if self.ratio is None else round(self.ratio, 4)
        d["met"] = self.met
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Row:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def not_run(benchmark: str, name: str, why: str, unit: str = "", target: str = "") -> Row:
    return Row(benchmark, name, None, None, unit, "", target=target, note=why)


# -- a baseline that checks itself -------------------------------------------------
BROKEN = "baseline broken: "


def check_baseline(row: Row, *, cost: float, reference: float, what: str, factor: float = 3.0) -> Row:
    """`row` as is, or, when its baseline is broken, a row that says so.

    A baseline is broken when one of its own costs (`cost`, e.g. the bare loop's
    screenshot per step) is more than `factor` times the same operation measured
    on its own in the same run (`reference`, e.g. a screenshot of a settled page):
    the baseline then measures something else (a hang, a retry, a timeout), and a
    ratio against it would flatter or blame the figure for nothing. The row keeps
    its name; figure and baseline become None (no ratio, no target checked), the
    note starts with "baseline broken: " and says why, the measured values stay
    in `extra`.
    """
    if not reference or reference <= 0 or cost <= factor * reference:
        return row
    why = (
        f"{BROKEN}{what} {cost:,.0f} vs {reference:,.0f} measured alone "
        f"({cost / reference:.1f}x > {factor:g}x); measured {fmt_num(row.figure)} vs "
        f"{fmt_num(row.baseline)} {row.unit}, no ratio"
    )
    extra = {**row.extra, "figure_measured": row.figure, "baseline_measured": row.baseline}
    note = f"{why}; {row.note}" if row.note else why
    return replace(row, figure=None, baseline=None, note=note, extra=extra)


# -- a bare Playwright loop, fair --------------------------------------------------
# Two animation frames (the crawler's own quiet wait): the input's handlers have run
# and painted, and a navigation they started (a form POST, a link) has almost always
# been requested by the time this answers.
_TWO_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


class BarePage:
    """What a minimal Playwright script does around a step: the input, then (two
    animation frames later) the navigation it started waited for to domcontentloaded
    and the new document's first two frames, then the screenshot; and a plain
    screenshot of a settled page, for `check_baseline`.

    Shooting right after a click that submits a form races the navigation: when
    the new document commits while Page.captureScreenshot is pending, Chromium
    never answers the capture, and Playwright waits out its timeout (30 s by
    default; docs/benchmarks.md, the web crawl). Waiting for the navigation narrows
    the race (a navigation requested after the frames still races); the screenshot's
    own timeout here is short, so a capture lost anyway costs `shot_timeout_ms`,
    not 30 s, and is retried and counted (`lost`).
    """

    def __init__(self, page, *, nav_timeout_s: float = 10.0, shot_timeout_ms: float = 3000):
        self.page, self.nav_timeout_s, self.shot_timeout_ms = page, nav_timeout_s, shot_timeout_ms
        self.lost = 0  # screenshots that timed out or failed and were taken again
        self.navigations = 0  # steps whose input started a navigation
        self._nav: list = []  # main-frame navigations not yet at domcontentloaded
        self._started = False  # a main-frame navigation started since the last step's wait
        page.on("request", self._on_request)
        page.on("requestfailed", lambda r: r in self._nav and self._nav.remove(r))
        page.on("domcontentloaded", lambda _p: self._nav.clear())

    def _on_request(self, req) -> None:
        try:
            if req.is_navigation_request() and req.frame == self.page.main_frame:
                self._nav.append(req)
                self._started = True
        except Exception:  # noqa: BLE001 - a service worker's request has no frame
            pass

    def goto(self, url: str) -> None:
        """The start page, to domcontentloaded (its navigation is not a step's)."""
        self.page.goto(url, wait_until="domcontentloaded")
        self._nav.clear()
        self._started = False

    def after_input(self) -> None:
        """Wait for what the input started: two frames, then a navigation's domcontentloaded
        and the new document's first two frames."""
        from playwright.sync_api import Error as PlaywrightError

        try:
            self.page.evaluate(_TWO_FRAMES_JS)
        except PlaywrightError:
            pass  # the document was replaced meanwhile: a navigation, waited for below
        started, self._started = self._started, False
        if not started:
            return
        self.navigations += 1
        deadline = time.monotonic() + self.nav_timeout_s
        while self._nav and time.monotonic() < deadline:
            self.page.wait_for_timeout(10)
        self._nav.clear()
        try:  # the new document's first frames: the screenshot then times the capture alone
            self.page.evaluate(_TWO_FRAMES_JS)
        except PlaywrightError:
            pass
        self._started = False

    def screenshot(self, **kw) -> bytes:
        from playwright.sync_api import Error as PlaywrightError

        for attempt in range(3):
            try:
                return self.page.screenshot(timeout=self.shot_timeout_ms, **kw)
            except PlaywrightError:
                self.lost += 1
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def settled_shot_s(self, **kw) -> float:
        """The wall time of one screenshot of this page once it has loaded and painted."""
        try:
            self.page.wait_for_load_state("load", timeout=self.nav_timeout_s * 1000)
            self.page.evaluate(_TWO_FRAMES_JS)
        except Exception:  # noqa: BLE001 - shoot what there is
            pass
        t = time.perf_counter()
        self.screenshot(**kw)
        return time.perf_counter() - t


# -- the machine -------------------------------------------------------------------
def machine_short() -> str:
    """Cores and load right now: what a row's figure was measured under."""
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cpu, load {load:.1f}"


def machine_description() -> dict:
    """The machine of a run, for the header above the table."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gb = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": mem_gb,
        "load_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "chromium": _chromium_version(),
        "gpu": gpu_name(),
    }


def _chromium_version() -> str | None:
    try:
        out = subprocess.run(
            ["/usr/bin/chromium", "--version"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Chromium ([\d.]+)", out)
    return m.group(1) if m else None


def gpu_name() -> str | None:
    """The first CUDA device's name, without importing torch (nvidia-smi)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    name = out.stdout.strip().splitlines()
    return name[0] if out.returncode == 0 and name else None


# -- peak memory of a subprocess -----------------------------------------------------
@dataclass
class ProcessRun:
    returncode: int
    wall_s: float
    peak_rss_bytes: int  # the child process itself (its high-water mark)
    peak_tree_bytes: int  # the child and its descendants (Chromium), sampled
    stdout: str
    stderr: str


def run_measured(
    cmd: list[str],
    *,
    cwd: Path | None = None,
    env: dict | None = None,
    timeout_s: float | None = None,
    interval_s: float = 0.2,
) -> ProcessRun:
    """Run `cmd`; its wall time, its own peak RSS (wait4's ru_maxrss) and the tree's.

    The child's own figure is exact (the kernel's high-water mark); the tree's
    is the sum of the RSS of it and its descendants, polled every `interval_s`.
    """
    import psutil

    out_f = _tmpfile()
    err_f = _tmpfile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out_f, stderr=err_f)
    tree_peak = [0]
    stop = threading.Event()

    def poll() -> None:
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            tree_peak[0] = max(tree_peak[0], total)
            stop.wait(interval_s)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    status, usage = _wait4(proc.pid, deadline)
    wall = time.perf_counter() - t0
    stop.set()
    poller.join()
    proc.returncode = status
    out_f.seek(0)
    err_f.seek(0)
    stdout, stderr = out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace")
    out_f.close()
    err_f.close()
    peak_self = usage.ru_maxrss * 1024 if usage is not None else 0
    return ProcessRun(status, wall, peak_self, max(tree_peak[0], peak_self), stdout, stderr)


def _tmpfile():
    import tempfile

    return tempfile.TemporaryFile()


def _wait4(pid: int, deadline: float | None):
    """Wait for `pid` (killing it at the deadline); (exit status, rusage)."""
    import signal

    while True:
        wpid, status, usage = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return (os.waitstatus_to_exitcode(status), usage)
        if deadline is not None and time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return (124, usage)
        time.sleep(0.05)


def peak_rss_self() -> int:
    """This process's own RSS high-water mark (VmHWM), bytes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- small helpers -------------------------------------------------------------------
def fmt_num(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def fmt_ratio(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.2f}" if v < 100 else fmt_num(v)


def write_rows(path: Path, rows: list[Row]) -> None:
    Path(path).write_text(json.dumps([r.as_dict() for r in rows], indent=2, ensure_ascii=False))


def read_rows(path: Path) -> list[Row]:
    return [Row.from_dict(d) for d in json.loads(Path(path).read_text())]


def pick(mode: str, sizes: dict) -> dict:
    """The sizes of `mode` (a benchmark's {"smoke": {...}, "quick": {...}, "full": {...}})."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    return sizes[mode]


def load() -> float:
    """The machine's 1-minute load average (printed with figures taken under load)."""
    return round(os.getloadavg()[0], 1)


def say(*parts) -> None:
    """A progress line with the load it was printed under."""
    print(*parts, f"[load {load()}]", flush=True)


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by linear interpolation; None for no values."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
