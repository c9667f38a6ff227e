"""The figures of an engine run that cannot report through Dagster Pipes (ms-swift,
LLaMA-Factory: their processes are not trajforge's code), read after the run from the
Hugging Face Trainer's own record: `trainer_state.json`, which both write beside the
checkpoint they save (ms-swift: OUT/checkpoints/v<N>-<time>/checkpoint-<step>/;
LLaMA-Factory: OUT/checkpoints/). Its `log_history` has one entry per logged step (loss,
num_input_tokens_seen with include_num_input_tokens_seen, train_tokens_per_second) and,
when saved at the end, a last one with the run's train_runtime; ms-swift's own
logging.jsonl beside the checkpoint has that last entry too."""

from __future__ import annotations

import json
import math
from pathlib import Path

STATE = "trainer_state.json"


class NoTrainerState(RuntimeError):
    """The engine ran but left no trainer_state.json of this run where it should."""


def latest_state(root: Path, since: float = 0.0) -> Path:
    """The newest trainer_state.json under `root` written after `since` (a time.time())."""
    found = [p for p in Path(root).rglob(STATE) if p.stat().st_mtime >= since]
    if not found:
        raise NoTrainerState(f"no {STATE} under {root} written by this run")
    return max(found, key=lambda p: p.stat().st_mtime)


def trainer_metrics(root: Path, since: float = 0.0) -> dict:
    """losses (per logged step), steps, loss_first/last, tokens, tokens_per_s (when the
    trainer counted tokens), checkpoint_path (the folder the state was saved with)."""
    path = latest_state(root, since)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        history = state["log_history"]
        steps = int(state["global_step"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise NoTrainerState(f"{path}: not a trainer state ({exc})") from None
    losses = [float(h["loss"]) for h in history if "loss" in h]
    metrics = {"checkpoint_path": str(path.parent), "steps": steps, "losses": losses}
    if losses:
        metrics.update(loss_first=losses[0], loss_last=losses[-1])
    history = history + _run_log(path)
    tokens = [h["num_input_tokens_seen"] for h in history if "num_input_tokens_seen" in h]
    if tokens:
        metrics["tokens"] = int(tokens[-1])
    runtime = [float(h["train_runtime"]) for h in history if "train_runtime" in h]
    if runtime:
        metrics["wall_s"] = runtime[-1]
    speed = [float(h["train_tokens_per_second"]) for h in history if "train_tokens_per_second" in h]
    if speed and math.isfinite(speed[-1]):
        metrics["tokens_per_s"] = speed[-1]
    elif tokens and runtime and runtime[-1] > 0:
        # ms-swift logs without the Trainer's per-log speed: the tokens over the training time
        metrics["tokens_per_s"] = int(tokens[-1]) / runtime[-1]
    return metrics


def _run_log(state: Path) -> list[dict]:
    """ms-swift's logging.jsonl of the run (in the folder above checkpoint-N): it has the
    run's final entry (train_runtime), logged after the last checkpoint's state was saved."""
    for folder in (state.parent, state.parent.parent):
        log = folder / "logging.jsonl"
        if log.is_file():
            entries = []
            for line in log.read_text(encoding="utf-8").splitlines():
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line being written
            return [e for e in entries if isinstance(e, dict)]
    return []
