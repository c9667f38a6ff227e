"""training.env_client.AsyncEnvClient (verl's agent loop talks to the environment server
through it) against `trajforge serve`: sessions, the 429 wait, and an environment
failure told apart from a bad request."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from crawlers.browser import descendant_pids
from tests.envs.serving import serve, tiny_env_file
from training.env_client import AsyncEnvClient, EnvFailed, EnvServerError

pytestmark = pytest.mark.slow


def _browsers(pid: int) -> list[int]:
    out = []
    for p in descendant_pids(pid):
        try:
            if "chrom" in Path(f"/proc/{p}/comm").read_text():
                out.append(p)
        except OSError:
            pass
    return out


async def _scenario(url: str, server_pid: int) -> None:
    async with AsyncEnvClient(url, open_timeout=30) as client:
        assert [e["name"] for e in await client.envs()] == ["tiny"]
        with pytest.raises(EnvServerError) as bad:
            await client.open("nope")
        assert (bad.value.status, bad.value.field) == (404, "env") and not isinstance(bad.value, EnvFailed)

        first, opened = await client.open("tiny", seed=1, policy_id="client")
        assert opened.observation["screenshot"].size == (800, 600)
        assert (
            opened.info["profile"]["frame"] == [812, 588]
            and opened.observation["instruction"] == "Press Add once"
        )

        # The server holds one session: a second open waits (429, Retry-After) until it is free.
        async def free_in(seconds: float) -> None:
            await asyncio.sleep(seconds)
            await client.close(first)

        t0 = time.monotonic()
        (second, _), _ = await asyncio.gather(client.open("tiny", policy_id="client"), free_in(1.5))
        assert time.monotonic() - t0 >= 1.4
        step = await client.step(second, {"type": "wait", "duration_ms": 10})
        assert not step.done and step.reward == 0.0 and step.info["executed"]

        # A browser that dies is the environment's failure (503), not the request's.
        before = set(_browsers(server_pid))
        assert before, "the session's Chromium was not found"
        for pid in before:
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(EnvFailed) as failed:
            await client.step(second, {"type": "tap", "x": 5, "y": 5})
        assert failed.value.status == 503 and failed.value.kind == "env_failed"
        await client.close(second)

    async with AsyncEnvClient("http://127.0.0.1:9", timeout=5) as nowhere:
        with pytest.raises(EnvFailed) as unreachable:
            await nowhere.open("tiny")
        assert unreachable.value.status == 0 and unreachable.value.kind == "unreachable"


def test_sessions_the_429_wait_and_failures(tiny_url, tmp_path):
    env_file = tiny_env_file(tmp_path, tiny_url)
    with serve(env_file, record_to=tmp_path / "data", max_sessions=1) as served:
        asyncio.run(_scenario(served.url, served.proc.pid))
