"""Synthesis assets: thoughts for the curated steps, the two training sets, task difficulty."""

from collections import Counter

import dagster as dg

from dagster_project.resources import StorageResource, VLMResource
from dagster_project.schedules import AFTER_CRAWL
from schemas.model_profiles import DEFAULT_PROFILE
from synthesis.cot_table import read_cot_rows, write_cot_table
from synthesis.difficulty import difficulty_table
from synthesis.set_options import ReasoningSetOptions
from synthesis.set_writer import write_chinese_gui_set, write_reasoning_set
from trajforge.report import plots
from trajforge.store.raw import atomic_write_table

REASONING_SET = "reasoning_set"
CHINESE_GUI_SET = "chinese_gui"


class SetConfig(dg.Config):
    # The model profile the set is written for (schemas.model_profiles): its trainer's
    # image frame and coordinates. qwen2.5-vl is what examples/train/ and the training
    # assets train; the manifest names it, and training, evaluation and the agent read it.
    profile: str = DEFAULT_PROFILE


class CoTConfig(dg.Config):
    align_n: int = 10  # re-predictions per step (GUI-Libra's check), with a VLM
    min_match: float = 0.3  # keep a step when at least this share of them match
    batch_size: int = 16


@dg.asset(
    automation_condition=AFTER_CRAWL, group_name="synthesise", kinds={"parquet"}, deps=["curated_steps"]
)
def cot_steps(
    context: dg.AssetExecutionContext, config: CoTConfig, storage: StorageResource, vlm: VLMResource
) -> dg.MaterializeResult:
    """Observation, reflection and plan for every kept step; with a VLM, the alignment checks.

    Without a configured model the deterministic template backend writes the thoughts,
    grounded in the accessibility tree and labelled "template" in every record.
    """
    backend = vlm.backend()
    if backend is None:
        context.log.info("no VLM configured: template thoughts, alignment unchecked")
    s = write_cot_table(
        storage.curated,
        storage.synthesis_dir / "cot",
        backend=backend,
        align_n=config.align_n,
        min_match=config.min_match,
        batch_size=config.batch_size,
        progress=context.log.info,
    )
    return dg.MaterializeResult(
        metadata={
            "steps": s["steps"],
            "backend": s["backend"],
            "parsed": s["parsed"],
            "languages": dg.MetadataValue.json(s["languages"]),
            "skipped": dg.MetadataValue.json(s["skipped"]),
            "alignment": dg.MetadataValue.json(s["alignment"]),
            "path": dg.MetadataValue.path(str(storage.synthesis_dir / "cot")),
        }
    )


def recorded_steps(storage: StorageResource):
    """The raw steps the curation read: the histories list the dropped steps too."""
    path = storage.raw_steps_dir / "steps.parquet"
    return path if path.exists() else None


def set_metadata(summary: dict) -> dict:
    st = summary["stats"]
    t = st["thought_chars"]
    return {
        "samples": st["samples"],
        "steps": st["steps"],
        "trajectories": st["trajectories"],
        "modes": dg.MetadataValue.json(st["modes"]),
        "language_share": dg.MetadataValue.json(st["language_share"]),
        "thought_chars": dg.MetadataValue.json(t),
        "thought_backends": dg.MetadataValue.json(st["thought_backends"]),
        "action_histogram": dg.MetadataValue.md(
            plots.image_md(plots.bar_png(st["action_types"], f"actions ({st['steps']} steps)"), "actions")
        ),
        "skipped_steps": dg.MetadataValue.json(summary.get("skipped_steps", {})),
        "skipped_trajectories": dg.MetadataValue.json(summary.get("skipped_trajectories", {})),
        "model_profile": summary.get("model_profile", ""),
        "provenance": dg.MetadataValue.json(summary.get("provenance", {})),
        "sources": dg.MetadataValue.json(summary.get("sources", {})),
        "verifiers": dg.MetadataValue.json(summary.get("verifiers", {})),
        "path": dg.MetadataValue.path(summary["out_dir"]),
    }


@dg.asset(automation_condition=AFTER_CRAWL, group_name="synthesise", kinds={"webdataset"}, deps=["cot_steps"])
def reasoning_set(
    context: dg.AssetExecutionContext, config: SetConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """Every kept step twice, reason-then-act and direct-act (1:1), with action and
    coordinate spans for the trainer's loss weights; the history as executed (dropped
    steps included) in the prompt; 3-50 steps."""
    with storage.shard_destination(REASONING_SET) as out:  # published at the block's end
        summary = write_reasoning_set(
            storage.curated,
            read_cot_rows(storage.synthesis_dir / "cot"),
            out,
            dataset=REASONING_SET,
            options=ReasoningSetOptions(profile=config.profile),
            recorded=recorded_steps(storage),
            progress=context.log.info,
        )
    context.log.info(
        f"reasoning set: {summary['stats']['samples']} samples, modes {summary['stats']['modes']}"
    )
    return dg.MaterializeResult(metadata=set_metadata(summary))


@dg.asset(automation_condition=AFTER_CRAWL, group_name="synthesise", kinds={"webdataset"}, deps=["cot_steps"])
def chinese_gui_set(
    context: dg.AssetExecutionContext, config: SetConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """Chinese tasks with Chinese reasoning (prompted in Chinese; a thought that is not
    Chinese is dropped and counted), from the Chinese web and mobile apps and imports."""
    with storage.shard_destination(CHINESE_GUI_SET) as out:
        summary = write_chinese_gui_set(
            storage.curated,
            read_cot_rows(storage.synthesis_dir / "cot"),
            out,
            options=ReasoningSetOptions(profile=config.profile),
            recorded=recorded_steps(storage),
            progress=context.log.info,
        )
    return dg.MaterializeResult(metadata=set_metadata(summary))


@dg.asset(
    automation_condition=AFTER_CRAWL, group_name="synthesise", kinds={"parquet"}, deps=["curated_steps"]
)
def task_difficulty(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    """Per-task difficulty features and score (0.4 steps + 0.2 apps + 0.2 gesture +
    0.2 distractions, normalised) with a level, for curricula."""
    table = difficulty_table(storage.curated)
    path = storage.synthesis_dir / "difficulty.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_table(path, table)
    levels = Counter(table.column("level").to_pylist())
    scores = Counter(round(v, 2) for v in table.column("score").to_pylist())
    return dg.MaterializeResult(
        metadata={
            "tasks": table.num_rows,
            "levels": dg.MetadataValue.json(dict(levels)),
            "score_histogram": dg.MetadataValue.md(
                plots.image_md(
                    plots.bar_png(
                        {f"{k:.2f}": v for k, v in sorted(scores.items())}, "difficulty score (tasks)"
                    ),
                    "difficulty",
                )
            ),
            "path": dg.MetadataValue.path(str(path)),
        }
    )
