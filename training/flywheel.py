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

Also here, shared by those entry points: `resolve_tasks` (task ids, template ids or
the whole catalog, among the environments' tasks) and `policy_backend_for` (a
checkpoint directory as a backend).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from schemas.records import Task
from training.rollouts import FAILED_PREFIX, Rollouts, rejection_sample
from trajforge.envs import SANDBOX, env_factories
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMBackend

log = logging.getLogger(__name__)


def resolve_tasks(spec: str | Sequence[str | Task], available: Sequence[Task]) -> list[Task]:
    """The tasks of `available` that `spec` names: "catalog" (all), or task ids, template ids
    (every task of the template) or Tasks (by id), in the order named. A name that matches
    nothing is an error naming it."""
    if isinstance(spec, str):
        if spec == "catalog":
            if not available:
                raise ValueError("tasks: the environments have no task")
            return list(available)
        spec = [spec]
    out: list[Task] = []
    for name in spec:
        key = name.task_id if isinstance(name, Task) else str(name)
        found = [t for t in available if key in (t.task_id, t.template_id)]
        if not found:
            raise ValueError(f"tasks: unknown task or template id {key!r}")
        out += [t for t in found if t not in out]
    return out


def checkpoint_id_of(path: str | Path) -> str:
    """A checkpoint directory's id (its metrics.json), else the model's id
    (directory name and config hash: an untrained base model)."""
    from training.checkpoint import finished_checkpoint
    from trajforge.vlm.transformers_backend import model_id_for

    metrics = finished_checkpoint(path)
    if metrics and metrics.get("checkpoint_id"):
        return str(metrics["checkpoint_id"])
    return model_id_for(path)


def policy_backend_for(
    path: str | Path,
    *,
    device: str = "auto",
    dtype: str = "auto",
    image_max_pixels: int | None = None,
    set_mode: str = "direct",
    record: bool = False,
    profile: str | None = None,
):
    """A checkpoint directory as a PolicyBackend (reasoning-set prompt, id = checkpoint id);
    `profile`: the model profile of the set it was trained on (training.data.set_profile)."""
    from training.checkpoint import load_policy
    from training.config import resolve_model_path
    from training.policy_backend import PolicyBackend

    path = resolve_model_path(str(path))
    model, processor = load_policy(path, device=device, dtype=dtype, gradient_checkpointing=False)
    return PolicyBackend(
        model,
        processor,
        checkpoint_id_of(path),
        max_image_pixels=image_max_pixels,
        set_mode=set_mode,
        record=record,
        profile=profile,
    )


def flywheel_turn(
    checkpoint: str | Path | VLMBackend,
    store: RawStore | str | Path,
    tasks: Sequence[Task] | str | Sequence[str],
    k: int = 1,
    *,
    envs: Sequence[str | Path] = (SANDBOX,),
    server_url: str | None = None,
    env: Any = None,
    pool: Any = None,
    seed: int = 0,
    catalog_seed: int | None = None,
    max_steps: int = 15,
    temperature: float | None = None,
    max_new_tokens: int = 128,
    devices: list[str] | None = None,
    languages: Sequence[str] = ("en",),
    device: str = "auto",
    dtype: str = "auto",
    image_max_pixels: int | None = None,
) -> dict:
    """One scheduled turn: k rollouts per task by `checkpoint`, recorded by verdict.

    `checkpoint` is a checkpoint directory (loaded as a PolicyBackend) or any
    VLMBackend (its model_id is the provenance). `envs`: environment files or
    "sandbox" (at `server_url`, else started for the turn; its catalog drawn from
    `catalog_seed`, default `seed`); `tasks`: "catalog", task or template ids of
    those environments' tasks, or Tasks to play (a sandbox task of any seed). `env`: a browser (or phone) to play on, `pool`: a
    pool to play several rollouts at once on (trajforge.envs.browser_pool).
    temperature None = greedy for k == 1, 1.0 for k > 1 (greedy would play the same
    episode k times). Returns counts per verdict, the success rate and the two
    collections.
    """
    store = store if isinstance(store, RawStore) else RawStore(Path(store))
    backend = (
        checkpoint
        if not isinstance(checkpoint, (str, Path))
        else policy_backend_for(checkpoint, device=device, dtype=dtype, image_max_pixels=image_max_pixels)
    )
    if temperature is None:
        temperature = 0.0 if k == 1 else 1.0
    given = None if isinstance(tasks, str) else [t for t in tasks if isinstance(t, Task)] or None
    with env_factories(
        list(envs),
        server_url=server_url,
        languages=languages,
        catalog_seed=seed if catalog_seed is None else catalog_seed,
        devices=devices,
        tasks=given,
        **({"env": env} if env is not None else {}),
    ) as factories:
        chosen = resolve_tasks(tasks, [t for f in factories for t in f.tasks])
        how = Rollouts(
            k=k,
            seed=seed,
            max_steps=max_steps,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
        )
        result = rejection_sample(
            [t.task_id for t in chosen], backend, how, envs=factories, store=store, pool=pool
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
