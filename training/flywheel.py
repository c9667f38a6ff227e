"""The data flywheel: a checkpoint's rollouts go back into the raw store, routed by verdict.

One turn (`flywheel_turn`) plays tasks of environments (the sandbox by default, or
environment files) with a trained policy, k rollouts each, through
training.rollouts.rejection_sample on the Gym API (trajforge.envs): the
environment's verifier decides every rollout; verified successes land in
`rollouts/<checkpoint id>`, everything else in `rollouts-failed/<checkpoint id>`,
each trajectory with source_name "<environment source>:agent:<checkpoint id>" (its
provenance). `sft_sources` lists what the next curation/SFT run reads: every
collection except the failure pool. Online RL (training/online.py) and evaluation
(training/evaluate.py) record their rollouts the same way.

Evaluation's online part is a turn (training.evaluate.run_eval).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.records import Task
from training.rollouts import FAILED_PREFIX, Rollouts, rejection_sample, resolve_tasks
from trajforge.envs import SANDBOX, env_factories
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMBackend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Turn:
    """How a turn plays. `envs`: environment files or "sandbox" (at `server_url`, else
    started for the turn; its catalog drawn from `catalog_seed`, default `seed`). `env`: a
    browser (or phone) to play on, `pool`: a pool to play several rollouts at once on
    (trajforge.envs.browser_pool). temperature None = greedy for k == 1, 1.0 for k > 1
    (greedy would play the same episode k times). device / dtype / image_max_pixels: how
    a checkpoint directory is loaded."""

    k: int = 1
    envs: Sequence[str | Path] = (SANDBOX,)
    server_url: str | None = None
    env: Any = None
    pool: Any = None
    seed: int = 0
    catalog_seed: int | None = None
    max_steps: int = 15
    temperature: float | None = None
    max_new_tokens: int = 128
    devices: list[str] | None = None
    languages: Sequence[str] = ("en",)
    device: str = "auto"
    dtype: str = "auto"
    image_max_pixels: int | None = None


def flywheel_turn(
    checkpoint: str | Path | VLMBackend,
    store: RawStore | str | Path,
    tasks: Sequence[Task] | str | Sequence[str],
    turn: Turn = Turn(),
) -> dict:
    """One scheduled turn: k rollouts per task by `checkpoint`, recorded by verdict.

    `checkpoint` is a checkpoint directory (loaded as a PolicyBackend) or any
    VLMBackend (its model_id is the provenance). `tasks`: "catalog", task or template
    ids of the turn's environments' tasks, or Tasks to play (a sandbox task of any
    seed); `turn`: where and how it plays (Turn). Returns counts per verdict, the success rate and the two
    collections.
    """
    from training.policy_backend import policy_backend_for

    store = store if isinstance(store, RawStore) else RawStore(Path(store))
    backend = (
        checkpoint
        if not isinstance(checkpoint, (str, Path))
        else policy_backend_for(
            checkpoint, device=turn.device, dtype=turn.dtype, image_max_pixels=turn.image_max_pixels
        )
    )
    k = turn.k
    temperature = turn.temperature
    if temperature is None:
        temperature = 0.0 if k == 1 else 1.0
    given = None if isinstance(tasks, str) else [t for t in tasks if isinstance(t, Task)] or None
    with env_factories(
        list(turn.envs),
        server_url=turn.server_url,
        languages=turn.languages,
        catalog_seed=turn.seed if turn.catalog_seed is None else turn.catalog_seed,
        devices=turn.devices,
        tasks=given,
        **({"env": turn.env} if turn.env is not None else {}),
    ) as factories:
        chosen = resolve_tasks(tasks, [t for f in factories for t in f.tasks])
        how = Rollouts(
            k=k,
            seed=turn.seed,
            max_steps=turn.max_steps,
            temperature=temperature,
            max_new_tokens=turn.max_new_tokens,
        )
        result = rejection_sample(
            [t.task_id for t in chosen], backend, how, envs=factories, store=store, pool=turn.pool
        )
    kept = sum(s for s, _ in result.rates.values())
    total = sum(n for _, n in result.rates.values())
    out = {
        "checkpoint_id": backend.model_id,
        "collection": result.collection,
        "failed_collection": result.failed_collection,
        "tasks": len(chosen),
        "k": k,
        "rollouts": total,
        "written": result.written,
        "skipped": result.skipped,
        "verdicts": {"success": kept, "not_success": total - kept},
        "outcomes": dict(result.outcomes),
        "success_rate": kept / total if total else 0.0,
        "rates": {t: list(v) for t, v in result.rates.items()},
        "unparseable_answers": result.unparseable_answers,
        "blocked_actions": result.blocked_actions,
        "steps": result.steps,
        "seconds": result.seconds,
    }
    log.info(
        "flywheel turn with %s: %d rollouts, %d successes -> %s, the rest -> %s",
        backend.model_id,
        total,
        kept,
        result.collection,
        result.failed_collection,
    )
    return out


def sft_sources(store: RawStore | str | Path) -> list[str]:
    """The collections the next curation / SFT run takes: crawls, imports and verified
    rollout successes (`rollouts/*`); never the failure pool (`rollouts-failed/*`)."""
    store = store if isinstance(store, RawStore) else RawStore(Path(store))
    return [c for c in store.collections() if not c.startswith(FAILED_PREFIX)]


def failure_pool(store: RawStore | str | Path) -> list[str]:
    """The failure pool's collections (`rollouts-failed/*`): kept for analysis and RL, not SFT."""
    store = store if isinstance(store, RawStore) else RawStore(Path(store))
    return [c for c in store.collections() if c.startswith(FAILED_PREFIX)]
