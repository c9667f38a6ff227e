"""The environment server benchmark's processes: `trajforge serve` in a subprocess and
the process trees (browsers, drivers) whose memory and leftovers it measures."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT  # noqa: E402


def _is_chromium(p) -> bool:
    try:
        return "chrom" in p.name().lower()
    except Exception:  # noqa: BLE001 - gone meanwhile
        return False


def tree(pid: int) -> list:
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_memory(pid: int, pss: bool = False) -> dict:
    """RSS (and PSS) of `pid` and its descendants, in MB, by kind (python, node, chromium)."""
    out: Counter = Counter()
    for p in tree(pid):
        try:
            kind = "chromium" if _is_chromium(p) else ("node" if "node" in p.name() else "python")
            out[f"rss_{kind}"] += p.memory_info().rss / 2**20
            if pss:
                out[f"pss_{kind}"] += p.memory_full_info().pss / 2**20
            out[f"n_{kind}"] += 1
        except Exception:  # noqa: BLE001 - gone meanwhile
            continue
    out["rss"] = sum(v for k, v in out.items() if k.startswith("rss_"))
    if pss:
        out["pss"] = sum(v for k, v in out.items() if k.startswith("pss_"))
    return {k: round(v, 1) for k, v in out.items()}


class TreeSampler:
    """Samples a process tree in a thread: CPU seconds (per process, so processes that
    come and go count), RSS over time, every Chromium process ever seen."""

    def __init__(self, pid: int, interval_s: float = 0.5):
        self.pid, self.interval_s = pid, interval_s
        self._cpu: dict[tuple[int, float], float] = {}
        self.samples: list[tuple[float, float]] = []  # (monotonic, tree RSS MB)
        self.chromium: set[tuple[int, float]] = set()  # (pid, create_time)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> float:
        rss = 0.0
        for p in tree(self.pid):
            try:
                with p.oneshot():
                    key = (p.pid, p.create_time())
                    t = p.cpu_times()
                    rss += p.memory_info().rss / 2**20
                    chromium = _is_chromium(p)
            except Exception:  # noqa: BLE001 - gone meanwhile
                continue
            with self._lock:
                self._cpu[key] = t.user + t.system
                if chromium:
                    self.chromium.add(key)
        with self._lock:
            self.samples.append((time.monotonic(), rss))
        return rss

    def cpu_s(self) -> float:
        """CPU seconds the tree has used (as last sampled); take differences."""
        self.sample()
        with self._lock:
            return sum(self._cpu.values())

    def peak_rss(self, since: float = 0.0) -> float:
        with self._lock:
            return max((r for t, r in self.samples if t >= since), default=0.0)


def chromium_alive(seen: set[tuple[int, float]]) -> list[int]:
    """Which of these Chromium processes (pid, start time) still run."""
    import psutil

    alive = []
    for pid, created in seen:
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - created) < 0.01 and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


def chromium_on_machine() -> int:
    """Every Chromium process on the machine (other jobs' included)."""
    import psutil

    return sum(1 for p in psutil.process_iter() if _is_chromium(p))


def browser_mains(pid: int) -> set[int]:
    """The Chromium browser processes (not renderers, not helpers) below `pid`."""
    out = set()
    for p in tree(pid):
        try:
            if _is_chromium(p) and not any(a.startswith("--type=") for a in p.cmdline()):
                out.add(p.pid)
        except Exception:  # noqa: BLE001
            continue
    return out


def process_started(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


# -- the server as a subprocess -------------------------------------------------------------
class Served:
    """`trajforge serve SOURCES --port 0` in a subprocess; its URL from stderr."""

    def __init__(self, sources: list[str], *, data: Path, max_sessions: int, idle_timeout: float, **extra):
        self.sources, self.data = sources, data
        self.args = ["--max-sessions", str(max_sessions), "--idle-timeout", str(idle_timeout)]
        for k, v in extra.items():  # True: a flag (--no-shared-driver)
            flag = f"--{k.replace('_', '-')}"
            self.args += [flag] if v is True else [flag, str(v)]
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log = data / "serve.log"

    def __enter__(self) -> Served:
        self.data.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "trajforge.cli", "serve", *self.sources, "--port", "0"]
        cmd += [*self.args, "--record-to", str(self.data)]
        self._log_f = open(self.log, "w")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self._log_f, start_new_session=True
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            found = re.search(r"on (http://\S+)", self.log.read_text())
            if found:
                self.url = found.group(1)
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"trajforge serve exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("trajforge serve never said where it listens")

    def stop(self) -> float:
        """SIGINT (the server records open episodes and closes every browser); seconds it took."""
        t = time.perf_counter()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._log_f.close()
        return time.perf_counter() - t

    def __exit__(self, *exc) -> None:
        self.stop()

    def metric(self, name: str) -> float:
        import httpx

        text = httpx.get(self.url + "/metrics", timeout=30).text
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0
