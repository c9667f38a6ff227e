"""Evaluation: step accuracy offline on a held-out split, task success online in environments.

Offline (`offline_step_accuracy`): every direct-act sample of the split is asked
with the prompt it was written with (its system and human turns, the
screenshot: schemas.agent_prompt.conversation_messages), greedily; the
answer is parsed (schemas.converters.gui_libra) and compared with the recorded
action as synthesis.rewards.step_reward does in RL: type, point in the target's
box (the sample's "target_box" when it holds the recorded point, as
synthesis.rewards.reference_box decides; else within POINT_TOLERANCE of the recorded
point), value token-F1 >= 0.5. A step succeeds when all three hold; an
answer that does not parse fails all three.

Online (training.flywheel.flywheel_turn): run_eval plays what training never saw
(`eval_tasks`) in the environments `envs` names (the sandbox by default, or
environment files), through the Gym API (trajforge.envs): the templates the set's
test split holds out (named in its manifest's `held_out`, else
trajforge.publish.holdout's default split) with task seeds from
trajforge.tasks.seeds.EVAL_SEED_BASE, which no crawl draws; or the tasks named. The
policy answers in text (training.agent.TextAgent, the reasoning set's prompt), the
env's verifier scores each episode, and the rollouts are recorded in the raw store
by verdict with the checkpoint id (training/flywheel.py): evaluation feeds the
flywheel.

`python -m training.evaluate --config X.yaml` runs either or both (EvalConfig).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from schemas.actions import Action
from schemas.agent_prompt import conversation_messages
from synthesis.rewards import (
    MIN_VALUE_F1,
    action_value,
    parse_prediction,
    point_in_box,
    reference_box,
    value_f1,
)
from training.config import TrainConfig
from training.flywheel import Turn, flywheel_turn

# Grounding sets: point-in-box accuracy by role, size bucket, language (training/grounding_eval.py).
from training.grounding_eval import offline_grounding_accuracy  # noqa: F401
from training.rollouts import resolve_tasks
from trajforge.vlm.backends import VLMBackend, VLMRequest

log = logging.getLogger(__name__)


class EvalConfig(TrainConfig):
    """Offline when `shards` is set, online when `store` is set (both: both).
    `max_steps` is the agent's step budget per episode."""

    shards: str | None = None
    split: str = "test"
    max_samples: int | None = None
    store: str | None = None
    # Environment files and/or "sandbox" (trajforge.envs.env_factories).
    envs: list[str] = ["sandbox"]
    server_url: str | None = None  # the sandbox's; None = start it in this process
    # "held_out": the tasks of the templates the split holds out; "catalog": every task
    # (seen templates too); or task / template ids. The sandbox's are drawn with evaluation
    # seeds (never crawled) either way; an environment file's tasks are its own (they
    # have no template to hold out: name them, or "catalog").
    tasks: list[str] | Literal["held_out", "catalog"] = "held_out"
    languages: list[str] = ["en"]
    devices: list[str] | None = None  # the screen's profile (None: each env's own)
    k: int = 1
    max_steps: int = 15
    max_new_tokens: int = 128
    temperature: float | None = None  # None: greedy for k == 1, 1.0 above
    set_mode: Literal["direct", "reason"] = "direct"


def _sample_messages(sample_json: dict, image: bytes) -> list[dict]:
    turns = {t["from"]: t["value"] for t in sample_json["conversations"]}
    return conversation_messages(turns["system"], turns["human"], image)


def score_answer(text: str, sample_json: dict) -> dict[str, bool]:
    """parsed / type / point / value / step for one answer against the sample's record."""
    w, h = sample_json["image"]["width"], sample_json["image"]["height"]
    ref = Action.model_validate(sample_json["action"])
    # The answer's frame: the sample's image (its model profile's frame) and coordinates.
    pred = parse_prediction(text, w, h, coords=sample_json.get("coords", "pixels"))
    if pred is None:
        return {"parsed": False, "type": False, "point": False, "value": False, "step": False}
    type_ok = pred.type == ref.type
    point_ok = point_in_box(pred, ref, reference_box(sample_json, ref))
    value_ok = value_f1(action_value(pred), action_value(ref)) >= MIN_VALUE_F1
    return {
        "parsed": True,
        "type": type_ok,
        "point": point_ok,
        "value": value_ok,
        "step": type_ok and point_ok and value_ok,
    }


def offline_step_accuracy(
    model: str | Path | VLMBackend,
    shards_dir: str | Path,
    split: str = "test",
    max_samples: int | None = None,
    *,
    max_new_tokens: int = 128,
    batch_size: int = 8,
    device: str = "auto",
    dtype: str = "auto",
    image_max_pixels: int | None = None,
) -> dict:
    """Greedy step accuracy of `model` (a checkpoint directory or a VLMBackend) on the
    direct-act samples of `split`: samples, parse_rate, type_accuracy, point_accuracy
    (over the samples whose action has a point; point_samples counts them),
    value_accuracy, step_success."""
    from training.data import iter_reasoning_samples
    from training.policy_backend import policy_backend_for

    backend = (
        model
        if not isinstance(model, (str, Path))
        else policy_backend_for(model, device=device, dtype=dtype, image_max_pixels=image_max_pixels)
    )
    started = time.perf_counter()
    counts = {"parsed": 0, "type": 0, "point": 0, "value": 0, "step": 0}
    n = point_n = 0
    pending: list[tuple[VLMRequest, dict]] = []

    def flush():
        nonlocal n, point_n
        answers = backend.generate([r for r, _ in pending], max_new_tokens, temperature=0.0)
        for text, (_, j) in zip(answers, pending):
            scores = score_answer(text if isinstance(text, str) else text[0], j)
            has_point = j["action"].get("x") is not None
            n += 1
            point_n += has_point
            for key, ok in scores.items():
                if key != "point" or has_point:
                    counts[key] += ok
        pending.clear()

    for key, sample_json, image in iter_reasoning_samples(shards_dir, split, mode="direct"):
        if max_samples is not None and n + len(pending) >= max_samples:
            break
        if not image:
            raise ValueError(f"{shards_dir}: sample {key} of split {split} has no image")
        w, h = sample_json["image"]["width"], sample_json["image"]["height"]
        pending.append(
            (
                VLMRequest(
                    messages=_sample_messages(sample_json, image), key=key, metadata={"width": w, "height": h}
                ),
                sample_json,
            )
        )
        if len(pending) >= batch_size:
            flush()
    if pending:
        flush()

    def rate(count: int, total: int) -> float:
        return count / total if total else 0.0

    return {
        "checkpoint_id": backend.model_id,
        "split": split,
        "samples": n,
        "parse_rate": rate(counts["parsed"], n),
        "type_accuracy": rate(counts["type"], n),
        "point_accuracy": rate(counts["point"], point_n),
        "point_samples": point_n,
        "value_accuracy": rate(counts["value"], n),
        "step_success": rate(counts["step"], n),
        "wall_s": round(time.perf_counter() - started, 3),
    }


def held_out_template_ids(shards: str | Path | None, split: str, templates: Iterable[str]) -> list[str]:
    """The templates of `templates` that `split` holds out: from the set's manifest when
    given (what this training set really held out), else trajforge.publish.holdout's
    default split."""
    from trajforge.publish.holdout import held_out_templates
    from trajforge.publish.plan import DEFAULT_SPLITS

    templates = set(templates)
    named = None
    if shards is not None:
        from trajforge.publish.shards import read_manifest

        named = (read_manifest(Path(shards)).get("held_out") or {}).get("templates", {}).get(split)
    if named is None:
        named = held_out_templates(templates, DEFAULT_SPLITS, "v1", among=(split,))
    return sorted(t for t in named if t in templates)


def eval_seed(cfg: EvalConfig) -> int:
    """The seed the sandbox's evaluation tasks are drawn with: never a crawl's."""
    from trajforge.tasks.seeds import EVAL_SEED_BASE

    return EVAL_SEED_BASE + cfg.seed


def eval_tasks(cfg: EvalConfig) -> list:
    """The tasks online evaluation plays, among cfg.envs' tasks in cfg.languages (the
    sandbox's drawn with eval_seed: neither the template nor the seed was crawled for
    training): the held-out templates' (cfg.tasks "held_out"), all ("catalog"), or
    the task / template ids named."""
    from trajforge.envs import source_tasks

    available = [
        t for s in cfg.envs for t in source_tasks(s, languages=cfg.languages, catalog_seed=eval_seed(cfg))
    ]
    if cfg.tasks == "held_out":
        templates = {t.template_id for t in available if t.template_id}
        held = held_out_template_ids(cfg.shards, cfg.split if cfg.split != "train" else "test", templates)
        tasks = [t for t in available if t.template_id in held]
        if not tasks:
            raise ValueError(
                f"tasks: no held-out template among the tasks of {cfg.envs} in languages {cfg.languages}"
            )
        return tasks
    return resolve_tasks(cfg.tasks, available)


def run_eval(cfg: EvalConfig, report=None, *, env=None) -> dict:
    """Offline and/or online evaluation of cfg.model_path; metrics flat enough for Dagster
    (offline_* and online_* keys)."""
    if cfg.shards is None and cfg.store is None:
        raise ValueError("EvalConfig: set shards (offline), store (online) or both")
    started = time.perf_counter()
    from training.data import set_profile
    from training.policy_backend import policy_backend_for

    # The agent plays with the profile of the set the model learnt from (its manifest).
    profile = set_profile(cfg.shards) if cfg.shards is not None else None
    backend = policy_backend_for(
        cfg.model_path,
        device=cfg.device,
        dtype=cfg.dtype,
        image_max_pixels=cfg.image_max_pixels,
        set_mode=cfg.set_mode,
        profile=None if profile is None else profile.name,
    )
    metrics: dict[str, Any] = {
        "kind": "eval",
        "checkpoint_id": backend.model_id,
        "model_path": cfg.model_path,
    }
    if cfg.shards is not None:
        off = offline_step_accuracy(
            backend, cfg.shards, cfg.split, cfg.max_samples, max_new_tokens=cfg.max_new_tokens
        )
        metrics.update({f"offline_{k}": v for k, v in off.items() if k != "checkpoint_id"})
        if report is not None:
            report.log(f"offline: step_success={off['step_success']:.3f} on {off['samples']} samples")
    if cfg.store is not None:
        tasks = eval_tasks(cfg)
        metrics["online_templates"] = ",".join(sorted({t.template_id or t.task_id for t in tasks}))
        turn = Turn(
            k=cfg.k,
            envs=cfg.envs,
            server_url=cfg.server_url,
            env=env,
            seed=cfg.seed,
            catalog_seed=eval_seed(cfg),
            max_steps=cfg.max_steps,
            temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
            devices=cfg.devices,
            languages=cfg.languages,
        )
        on = flywheel_turn(backend, cfg.store, tasks, turn)
        metrics.update({f"online_{k}": v for k, v in on.items() if k not in ("checkpoint_id", "rates")})
        metrics["success_rate"] = on["success_rate"]
        if report is not None:
            report.log(f"online: success_rate={on['success_rate']:.3f} over {on['rollouts']} rollouts")
    metrics["wall_s"] = round(time.perf_counter() - started, 3)
    return metrics


def main(argv: list[str] | None = None) -> dict:
    from training.entry import entry_point

    return entry_point(
        argv, prog="python -m training.evaluate", doc=__doc__, config_cls=EvalConfig, run=run_eval
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
