"""Run a training command on a node of a Ray cluster (the training launcher's kind `ray`).

The command (an engine's argv: verl's trainer, torchrun for TRL / ms-swift /
LLaMA-Factory, or `python -m training.sft`) runs as a Ray task that asks for the CPUs
and GPUs it needs, so Ray picks a node that has them; verl's trainer then joins the
same cluster for its own workers. The node must see the same paths as the caller
(the image, the data root: a shared volume), as a Kubernetes pod's mount does.
Its output goes to `log_path`; the task answers (exit status, node id, the log's
tail). A cancelled task (ray.cancel) kills the command's process group first, and
the command dies with the Ray worker that started it (PR_SET_PDEATHSIG): nothing is
left running on the node.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_TAIL_BYTES = 2000


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the Ray worker that started it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux/glibc: a cancelled task still kills the group


def tail(path: Path, limit: int = _TAIL_BYTES) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace").strip()


def run_command(argv: list[str], env: dict[str, str], cwd: str, log_path: str) -> tuple[int, str, str]:
    """On the node: run argv to the end; (exit status, this node's Ray id, log tail)."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - the child only calls prctl
        )
        try:
            status = proc.wait()
        except BaseException:  # ray.cancel raises KeyboardInterrupt here
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return status, node, tail(Path(log_path))


def run_on_ray(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    log_path: Path,
    address: str | None = None,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
) -> tuple[int, str, str]:
    """Run argv as a Ray task on a node with num_cpus / num_gpus free; wait for it.
    Joins the cluster at `address` ("auto", "ray://head:10001") unless this process is
    already in one."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address or "auto", include_dashboard=False, log_to_driver=False)
    task = ray.remote(run_command).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)
    ref = task.remote(list(argv), dict(env), str(cwd), str(log_path))
    try:
        return ray.get(ref)
    except BaseException:
        ray.cancel(ref)  # the task kills the command's group
        raise
