"""The server's warm pool, through `trajforge serve sandbox` over HTTP: an announced episode
is handed over as a cold reset would have opened it, a reset that asks for another one is
cold and counted, and a prepared episode that is never used is never recorded."""

from __future__ import annotations

import re
import time
from collections import Counter

import httpx
import pytest

from tests.envs import serving
from trajforge.envs.remote import RemoteEnv
from trajforge.envs.wire import decode_observation
from trajforge.store.raw import RawStore

pytestmark = pytest.mark.slow

IDLE_S = 8.0
STATUS_BAR_PX = 26  # the sandbox's phone status bar: its clock and battery are drawn per session
# What differs between any two resets of one task and seed: the episode's id and clock.
PER_EPISODE = {"trajectory_id", "timings", "elements"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = tmp_path_factory.mktemp("rollouts")
    with serving.serve("sandbox", record_to=data, max_sessions=4, idle_timeout=IDLE_S) as server:
        tasks = httpx.get(server.url + "/v1/envs").json()["envs"][0]["tasks"]
        with httpx.Client(base_url=server.url, timeout=120) as client:
            yield {"url": server.url, "data": data, "tasks": tasks, "client": client}


def post(served, path: str, body: dict) -> dict:
    answer = served["client"].post(path, json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def health(served) -> dict:
    return served["client"].get("/v1/health").json()["resets"]


def without_status_bar(body: dict) -> dict:
    """The observation and info a reset answered, less what no two resets share."""
    obs = decode_observation(body["observation"])
    a11y = obs["a11y"].splitlines()
    # The status bar's subtree: the aria-hidden node and the lines indented under it.
    bar = next(i for i, line in enumerate(a11y) if "[aria-hidden]" in line)
    depth = len(a11y[bar]) - len(a11y[bar].lstrip())
    end = next(i for i in range(bar + 1, len(a11y)) if len(a11y[i]) - len(a11y[i].lstrip()) <= depth)
    elements = [e for e in body["info"]["elements"] if e["bbox"][1] >= STATUS_BAR_PX]
    return {
        "screen": obs["screenshot"][STATUS_BAR_PX:].tobytes(),
        "a11y": a11y[:bar] + a11y[end:],
        "instruction": obs["instruction"],
        "url": obs["url"],
        "info": {k: v for k, v in body["info"].items() if k not in PER_EPISODE},
        "elements": [{k: v for k, v in e.items() if k != "index"} for e in elements],
    }


def test_a_warm_hand_over_gives_what_a_cold_reset_gives(served):
    task, seed = served["tasks"][1], 4
    before = health(served)
    sid = post(
        served,
        "/v1/sessions",
        {"env": "sandbox", "task_id": served["tasks"][0], "seed": 3, "next": {"task_id": task, "seed": seed}},
    )["session_id"]
    warm = post(served, f"/v1/sessions/{sid}/reset", {"task_id": task, "seed": seed})
    cold = post(served, f"/v1/sessions/{sid}/reset", {"task_id": task, "seed": seed})
    after = health(served)
    assert (after["warm"] - before["warm"], after["cold"] - before["cold"]) == (1, 2)
    assert after["missed"] == before["missed"]
    warm_seen, cold_seen = without_status_bar(warm), without_status_bar(cold)
    assert warm_seen["info"]["task"]["task_id"] == task and warm_seen["info"]["seed"] == seed
    for part in warm_seen:
        assert warm_seen[part] == cold_seen[part], part
    assert warm["info"]["trajectory_id"] != cold["info"]["trajectory_id"]
    served["client"].delete(f"/v1/sessions/{sid}")


def test_a_reset_that_asks_for_another_episode_is_cold_and_counted(served):
    task = served["tasks"][2]
    before = health(served)
    sid = post(served, "/v1/sessions", {"env": "sandbox", "seed": 1, "next": {"task_id": task, "seed": 5}})[
        "session_id"
    ]
    body = post(served, f"/v1/sessions/{sid}/reset", {"task_id": task, "seed": 6})
    assert body["info"]["seed"] == 6 and body["info"]["task"]["task_id"] == task
    after = health(served)
    assert (after["warm"], after["cold"] - before["cold"], after["missed"] - before["missed"]) == (
        before["warm"],
        2,
        1,
    )
    text = served["client"].get("/metrics").text
    assert re.search(r'trajforge_env_warm_misses_total\{env="sandbox"\} [1-9]', text)
    assert re.search(r'trajforge_env_resets_total\{env="sandbox",start="cold"\} [1-9]', text)
    # A next announced on the step: the terminal step's reset is then a hand-over.
    step = post(served, f"/v1/sessions/{sid}/step", {"action": {"type": "done"}, "next": {"seed": 9}})
    assert step["terminated"]
    ended = served["client"].post(f"/v1/sessions/{sid}/step", json={"action": {"type": "done"}})
    assert ended.status_code == 409 and ended.json()["error"]["kind"] == "episode_ended"
    assert post(served, f"/v1/sessions/{sid}/reset", {"seed": 9})["info"]["seed"] == 9
    assert health(served)["warm"] == before["warm"] + 1
    served["client"].delete(f"/v1/sessions/{sid}")


def recorded(served, policy: str) -> list:
    trajs = RawStore(served["data"] / "raw").iter_trajectories()
    return [t for t in trajs if t.source_name.endswith(f":agent:{policy}")]


def test_a_prepared_episode_never_used_is_never_recorded(served):
    tasks = served["tasks"]
    env = RemoteEnv(served["url"], "sandbox", policy_id="handover")
    env.announce_next(tasks[3], 7)
    env.reset(seed=2, options={"task_id": tasks[0]})
    env.step({"type": "wait"})
    env.announce_next(tasks[4], 8)  # prepared after the hand-over below, never asked for
    _, info = env.reset(seed=7, options={"task_id": tasks[3]})
    env.step({"type": "wait"})
    env.close()
    trajs = recorded(served, "handover")
    # The two episodes played, each with its step: the first ended by the hand-over as a
    # cold reset would end it; neither prepared-but-unused one (tasks[4], nor the spare's
    # first) is in the store.
    assert sorted((t.task.task_id, t.num_steps) for t in trajs) == sorted([(tasks[0], 1), (tasks[3], 1)])
    ended = {t.task.task_id: (t.outcome, t.error) for t in trajs}
    assert ended == {
        tasks[0]: ("failure", "reset() before the episode ended"),
        tasks[3]: ("failure", "close() before the episode ended"),
    }
    assert info["trajectory_id"] in {t.trajectory_id for t in trajs}


def test_a_reaped_session_records_its_episode_in_play_but_not_its_prepared_one(served):
    sid = post(
        served,
        "/v1/sessions",
        {
            "env": "sandbox",
            "seed": 1,
            "policy_id": "reaped",
            "next": {"task_id": served["tasks"][5], "seed": 2},
        },
    )["session_id"]
    time.sleep(IDLE_S + 3)  # the reaper looks every IDLE_S / 4
    answer = served["client"].post(f"/v1/sessions/{sid}/reset", json={})
    assert answer.status_code == 410, answer.text
    deadline = time.monotonic() + 30  # 410 from the moment it is taken; its envs close after
    while not recorded(served, "reaped") and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)  # a second episode (the prepared one's) would land by now
    outcomes = Counter(t.outcome for t in recorded(served, "reaped"))
    assert outcomes == Counter({"error": 1}), outcomes
