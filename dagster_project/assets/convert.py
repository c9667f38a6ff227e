"""converted_sets: every shipped set in the trainers' formats (trajforge.convert), and a
check that reads a sample of each output back and compares it with its set."""

import json
from pathlib import Path

import dagster as dg

from dagster_project.resources import StorageResource
from trajforge.convert import FORMATS, MANIFEST, ConvertError, convert, round_trip

CONVERTED_SETS = "converted_sets"
SETS = ("reasoning_set", "chinese_gui", "grounding_set")  # shard folders converted when present
CHECK_SAMPLE = 64  # items of each set compared by the check


class ConvertConfig(dg.Config):
    formats: list[str] = sorted(FORMATS)
    # None: the set's own profile; another one is refused (the images are stored at its frame).
    profile: str | None = None


def converted_dir(storage: StorageResource) -> Path:
    return storage.path / "converted"


@dg.asset(
    group_name="export", kinds={"parquet", "json"}, deps=["reasoning_set", "chinese_gui_set", "grounding_set"]
)
def converted_sets(
    context: dg.AssetExecutionContext, config: ConvertConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """The sets as LLaMA-Factory, ms-swift, verl, EasyR1, TRL and Hub Parquet data,
    each with a manifest (counts per split and kind, file hashes, samples a format
    cannot express and why)."""
    unknown = sorted(set(config.formats) - set(FORMATS))
    if unknown:
        raise dg.Failure(f"unknown formats {unknown}; use {sorted(FORMATS)}")
    written = {}
    for name in SETS:
        set_dir = storage.shards_dir(name)
        if not (set_dir / "manifest.json").is_file():
            context.log.info(f"{name}: no set at {set_dir}, not converted")
            continue
        for fmt in config.formats:
            try:
                m = convert(set_dir, fmt, converted_dir(storage) / name / fmt, profile=config.profile)
            except ConvertError as err:
                raise dg.Failure(str(err)) from err
            written[f"{name}/{fmt}"] = {
                "samples": m["samples"],
                "per_split": m["per_split"],
                "inexpressible": m["inexpressible_count"],
            }
    return dg.MaterializeResult(
        metadata={
            "outputs": dg.MetadataValue.json(written),
            "path": dg.MetadataValue.path(str(converted_dir(storage))),
        }
    )


@dg.asset_check(
    asset=CONVERTED_SETS,
    blocking=True,
    description=f"the first {CHECK_SAMPLE} samples of every set read back from each "
    "format exactly (prompt, answer, image sha256, coordinates)",
)
def converted_sets_round_trip(storage: StorageResource) -> dg.AssetCheckResult:
    problems, outputs = [], 0
    for manifest in sorted(converted_dir(storage).glob(f"*/*/{MANIFEST}")):
        out = manifest.parent
        outputs += 1
        source = json.loads(manifest.read_text())["source"]["path"]
        try:
            found = round_trip(source, out, limit=CHECK_SAMPLE)
        except Exception as err:  # noqa: BLE001 - an unreadable output is a failed check
            found = [f"cannot read back: {err!r}"]
        problems += [f"{out.parent.name}/{out.name}: {p}" for p in found]
    return dg.AssetCheckResult(
        passed=outputs > 0 and not problems,
        metadata={
            "outputs": outputs,
            "problems": len(problems),
            "detail": "\n".join(problems[:20]) or ("ok" if outputs else "no converted output"),
        },
    )


CONVERT_CHECKS = [converted_sets_round_trip]
