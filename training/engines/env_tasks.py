"""An RL dataset of environment episodes for verl's agent loop (training/engines/verl_agent_loop.py).

    python -m training.engines.env_tasks http://127.0.0.1:8700 train.parquet --episodes 4 [--env tiddlywiki ...]

One row per episode to play: every task of every environment the server serves
(`GET /v1/envs`; an environment without tasks makes up its own: one exploration
episode per row), `episodes` rows each with seeds `seed`, `seed + 1`, ... The row is
what verl's RLHFDataset reads: `prompt` (a placeholder user turn naming the episode:
the loop builds the real prompt from the environment's first observation),
`data_source` (`trajforge/<env>`), `agent_name` (the loop), `reward_model` (style
`env`: the environment's verifier scores the episode) and `extra_info` {index, env,
task_id, seed}. Needs httpx and pyarrow only (both in a verl venv).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

AGENT_NAME = "trajforge_gui"  # training.engines.verl_agent_loop.AGENT_NAME (that module imports verl)


def env_task_rows(
    envs: list[dict],
    *,
    episodes: int = 1,
    seed: int = 0,
    only: list[str] | None = None,
    agent_name: str = AGENT_NAME,
) -> list[dict]:
    """Rows for `envs` (the server's `GET /v1/envs` list), in its order."""
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    names = [e["name"] for e in envs]
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        raise ValueError(f"the server serves no {unknown}; it serves {names}")
    rows: list[dict] = []
    for env in envs:
        if only and env["name"] not in only:
            continue
        for task_id in env.get("tasks") or [None]:
            for k in range(episodes):
                index = len(rows)
                what = f"task {task_id}" if task_id else "an episode it makes up"
                rows.append(
                    {
                        "data_source": f"trajforge/{env['name']}",
                        "prompt": [
                            {"role": "user", "content": f"Play {what} of the environment {env['name']}."}
                        ],
                        "ability": "gui",
                        "agent_name": agent_name,
                        "reward_model": {"style": "env", "ground_truth": ""},
                        "extra_info": {
                            "index": index,
                            "env": env["name"],
                            "task_id": task_id,
                            "seed": seed + k,
                        },
                    }
                )
    return rows


def write_env_tasks(url: str, out: str | Path, **kwargs) -> int:
    """The rows of env_task_rows for the server at `url`, written to `out` (parquet,
    via a temporary name); the number of rows."""
    answer = httpx.get(url.rstrip("/") + "/v1/envs", timeout=30)
    answer.raise_for_status()
    rows = env_task_rows(answer.json()["envs"], **kwargs)
    if not rows:
        raise ValueError(f"{url} serves no environment to play")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(out)
    return len(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the environment server (trajforge serve)")
    parser.add_argument("out", help="the parquet file to write")
    parser.add_argument("--episodes", type=int, default=1, help="rows per task (seeds seed, seed+1, ...)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", action="append", help="only this environment (repeatable)")
    args = parser.parse_args(argv)
    n = write_env_tasks(args.url, args.out, episodes=args.episodes, seed=args.seed, only=args.env)
    print(f"{n} episodes -> {args.out}")


if __name__ == "__main__":
    main()
