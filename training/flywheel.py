"""The data flywheel: a checkpoint's rollouts go back into the raw store, routed by verdict.

One turn (`flywheel_turn`) plays tasks in the sandbox with a trained policy,
k rollouts each, through sandbox.rollouts.rejection_sample: the app's state
verifies every rollout; verified successes land in `rollouts/<checkpoint id>`,
everything else in `rollouts-failed/<checkpoint id>`, each trajectory with
source_name "sandbox:agent:<checkpoint id>" (its provenance). `sft_sources`
lists what the next curation/SFT run reads: every collection except the
failure pool. Online RL (training/online.py) and evaluation
(training/evaluate.py) record their rollouts the same way.

Also here, shared by those entry points: `resolve_tasks` (template ids or the
whole catalog as Tasks), `sandbox_url` (the given server, or one started for
the call) and `policy_backend_for` (a checkpoint directory as a backend).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from crawlers.crawl_episode import CrawlEnv
from sandbox.rollouts import FAILED_PREFIX, Rollouts, rejection_sample
from schemas.records import Task
from trajforge.store.raw import RawStore
from trajforge.vlm.backends import VLMBackend

log = logging.getLogger(__name__)


def resolve_tasks(spec: str | Sequence[str], languages: Sequence[str] = ("en",), seed: int = 0) -> list[Task]:
    """Tasks of the sandbox's templates: "catalog" (all) or a list of template ids, one
    task per template and language. An unknown template id is an error naming it."""
    from sandbox.tasks import TEMPLATES, build_catalog

    if isinstance(spec, str) and spec != "catalog":
        spec = [spec]
    wanted = None if spec == "catalog" else list(spec)
    for tid in wanted or []:
        if tid not in TEMPLATES:
            raise ValueError(f"tasks: unknown template id {tid!r}")
    tasks = [
        t for t in build_catalog(1, tuple(languages), seed=seed) if wanted is None or t.template_id in wanted
    ]
    if not tasks:
        raise ValueError(f"tasks: no template of {spec!r} exists in languages {list(languages)}")
    return tasks


@contextmanager
def sandbox_url(server_url: str | None) -> Iterator[str]:
    """`server_url` as given, or the sandbox started in this process for the block."""
    if server_url:
        yield server_url
        return
    from sandbox.server import SandboxServer

    with SandboxServer() as server:
        yield server.url


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
    server_url: str | None = None,
    env: CrawlEnv | None = None,
    seed: int = 0,
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
    VLMBackend (its model_id is the provenance). `tasks`: Task objects, template
    ids or "catalog". temperature None = greedy for k == 1, 1.0 for k > 1 (greedy
    would play the same episode k times). Returns counts per verdict, the
    success rate and the two collections.
    """
    store = store if isinstance(store, RawStore) else RawStore(Path(store))
    if isinstance(tasks, str) or (tasks and not isinstance(tasks[0], Task)):
        tasks = resolve_tasks(tasks, languages, seed)
    backend = (
        checkpoint
        if not isinstance(checkpoint, (str, Path))
        else policy_backend_for(checkpoint, device=device, dtype=dtype, image_max_pixels=image_max_pixels)
    )
    if temperature is None:
        temperature = 0.0 if k == 1 else 1.0
    with sandbox_url(server_url) as url:
        how = Rollouts(
            server_url=url,
            k=k,
            seed=seed,
            max_steps=max_steps,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            devices=devices,
        )
        result = rejection_sample(tasks, backend, how, store=store, env=env)
    kept = sum(s for s, _ in result.rates.values())
    total = sum(n for _, n in result.rates.values())
    out = {
        "checkpoint_id": backend.model_id,
        "collection": result.collection,
        "failed_collection": result.failed_collection,
        "tasks": len(tasks),
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
