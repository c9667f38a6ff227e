"""Arrow schemas of the records and the row conversions for Parquet.

Rows are plain dicts that match the schemas; task params are stored as a JSON
string so that one column type fits every template.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ValidationError

from .errors import SchemaError
from .records import Step, Trajectory

ACTION_TYPE = pa.struct(
    [
        ("type", pa.string()),
        ("x", pa.float64()),
        ("y", pa.float64()),
        ("x2", pa.float64()),
        ("y2", pa.float64()),
        ("direction", pa.string()),
        ("text", pa.string()),
        ("duration_ms", pa.int64()),
        ("description", pa.string()),
        # Added later (scroll amounts): step parts written before it lack the field; it reads as None.
        ("amount", pa.float64()),
    ]
)

VISIBILITY_TYPE = pa.struct(
    [
        ("on_screen", pa.bool_()),
        ("visible_fraction", pa.float64()),
        ("hit_fraction", pa.float64()),
        ("centre_hit", pa.bool_()),
        ("modal_covered", pa.bool_()),
    ]
)

ELEMENT_TYPE = pa.struct(
    [
        ("role", pa.string()),
        ("name", pa.string()),
        ("bbox", pa.list_(pa.float64(), 4)),
        # Added later (issue 18): step parts written before it lack the field; it reads as None.
        ("visibility", VISIBILITY_TYPE),
    ]
)

STEP_SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.string()),
        ("index", pa.int32()),
        ("screenshot", pa.string()),
        ("image_format", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("url", pa.string()),
        ("a11y_tree", pa.large_string()),
        ("elements", pa.list_(ELEMENT_TYPE)),
        ("action", ACTION_TYPE),
        ("target", ELEMENT_TYPE),
        ("screen_changed", pa.bool_()),
        ("error", pa.string()),
        ("guard", pa.string()),
        ("thought", pa.large_string()),
        ("started_at", pa.float64()),
        ("observe_ms", pa.float64()),
        ("act_ms", pa.float64()),
        ("probes_json", pa.large_string()),
    ]
)
# Columns a steps part written at an older schema version lacks (read as null).
STEP_ADDED = {"1.2": ("probes_json",)}

TASK_TYPE = pa.struct(
    [
        ("task_id", pa.string()),
        ("instruction", pa.string()),
        ("language", pa.string()),
        ("app", pa.string()),
        ("template_id", pa.string()),
        ("params_json", pa.string()),
        ("start_url", pa.string()),
    ]
)

DEVICE_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("viewport_width", pa.int32()),
        ("viewport_height", pa.int32()),
        ("pixel_ratio", pa.float64()),
        ("is_mobile", pa.bool_()),
        ("locale", pa.string()),
        ("theme", pa.string()),
        ("font_scale", pa.float64()),
    ]
)

TRAJECTORY_SCHEMA = pa.schema(
    [
        ("trajectory_id", pa.string()),
        ("task", TASK_TYPE),
        ("platform", pa.string()),
        ("app", pa.string()),
        ("device", DEVICE_TYPE),
        ("source", pa.string()),
        ("source_name", pa.string()),
        ("policy", pa.string()),
        ("seed", pa.int64()),
        ("outcome", pa.string()),
        ("verified_by", pa.string()),
        ("num_steps", pa.int32()),
        ("distractions", pa.list_(pa.string())),
        ("error", pa.string()),
        ("pipeline_version", pa.string()),
        ("created_at", pa.float64()),
        ("reward", pa.float64()),
        ("verifier", pa.string()),
        ("verifier_reason", pa.string()),
    ]
)
# Columns a trajectories part written at an older schema version lacks (read as null).
TRAJECTORY_ADDED = {"1.1": ("reward", "verifier", "verifier_reason")}

TASK_SCHEMA = pa.schema(list(TASK_TYPE))


def _element_row(e) -> dict | None:
    if e is None:
        return None
    return {
        "role": e.role,
        "name": e.name,
        "bbox": list(e.bbox) if e.bbox else None,
        "visibility": e.visibility.model_dump() if e.visibility else None,
    }


def well_formed(value: Any) -> Any:
    """`value` with every lone surrogate in its strings replaced by U+FFFD.

    Page text can hold half of a surrogate pair (JS strings are UTF-16; the
    DevTools protocol passes them on as "\\ud83d"), and Arrow, Parquet and
    UTF-8 JSON refuse such a string: one odd character on one page would fail
    the whole batch it is written in.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {k: well_formed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [well_formed(v) for v in value]
    return value


def step_to_row(step: Step) -> dict[str, Any]:
    row = step.model_dump(mode="json", exclude={"elements", "target", "action"})
    row["action"] = step.action.model_dump(mode="json")
    row["elements"] = [_element_row(e) for e in step.elements]
    row["target"] = _element_row(step.target)
    return well_formed(row)


def trajectory_to_row(traj: Trajectory) -> dict[str, Any]:
    row = traj.model_dump(mode="json", exclude={"task"})
    row["task"] = task_to_row(traj.task)
    return well_formed(row)


def task_to_row(task) -> dict[str, Any]:
    row = task.model_dump(mode="json", exclude={"params"})
    row["params_json"] = task.params_json()
    return well_formed(row)


def _drop_nulls(d: Any) -> Any:
    # Anything but a dict is passed on as is: validation then names the field.
    if not isinstance(d, dict):
        return d
    return {k: v for k, v in d.items() if v is not None}


def _params(params_json: Any, *, source, record, field: str) -> dict:
    """Task params stored as a JSON object string; a SchemaError naming the field otherwise."""
    if params_json is None or params_json == "":
        return {}
    try:
        params = json.loads(params_json)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"not valid JSON ({exc})", source=source, record=record, field=field) from None
    if not isinstance(params, dict):
        raise SchemaError(
            f"not a JSON object: {str(params_json)[:60]!r}", source=source, record=record, field=field
        )
    return params


def _require_row(row: Any, *, source) -> None:
    if not isinstance(row, dict):
        raise SchemaError(f"expected an object, got {type(row).__name__}", source=source, field="record")


def row_to_task(row: dict, *, source: str | None = None):
    from .records import Task

    _require_row(row, source=source)
    row = dict(row)
    record = row.get("task_id")
    if "params_json" in row:
        row["params"] = _params(row.pop("params_json"), source=source, record=record, field="params_json")
    return _validate(Task, _drop_nulls(row), source=source, record=record)


def row_to_step(row: dict[str, Any], *, source: str | None = None) -> Step:
    """A Parquet/JSON row back into a validated Step (errors name the field)."""
    _require_row(row, source=source)
    record = f"{row.get('trajectory_id')}#{row.get('index')}"
    data = dict(row)
    data["action"] = _drop_nulls(data.get("action"))
    elements = data.get("elements") or []
    data["elements"] = [_drop_nulls(e) for e in elements] if isinstance(elements, list) else elements
    data["target"] = _drop_nulls(data.get("target"))
    return _validate(Step, _drop_nulls(data), source=source, record=record)


def row_to_trajectory(row: dict[str, Any], *, source: str | None = None) -> Trajectory:
    _require_row(row, source=source)
    data = dict(row)
    task = data.get("task") or {}
    if isinstance(task, dict) and "params_json" in task:
        task = dict(task)
        task["params"] = _params(
            task.pop("params_json"), source=source, record=row.get("trajectory_id"), field="task.params_json"
        )
    data["task"] = _drop_nulls(task)
    data["device"] = _drop_nulls(data.get("device"))
    return _validate(Trajectory, _drop_nulls(data), source=source, record=row.get("trajectory_id"))


def _validate(model: type[BaseModel], data: dict, *, source, record):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        raise SchemaError(err["msg"], source=source, record=record, field=field) from None


def validate_step(data: dict, *, source: str | None = None, record: Any = None) -> Step:
    """Validate a step given as a dict of the record's own shape."""
    return _validate(Step, data, source=source, record=record)


def validate_trajectory(data: dict, *, source: str | None = None, record: Any = None) -> Trajectory:
    return _validate(Trajectory, data, source=source, record=record)


# -- records to Arrow, column by column ------------------------------------------------
# Why not Table.from_pylist([step_to_row(s)]): the per-step dict rows and the
# recursive surrogate scan over them cost ~0.5 ms a step, 14x the Parquet write
# (benchmarks/raw_store_scale.py). Here each column is one pa.array call over
# the records' attributes; a column is scanned for lone surrogates only when
# Arrow refuses it. step_to_row / trajectory_to_row stay the reference: the
# tables are equal (tests/schemas/test_arrow_columns.py).


def _column(values: list, type_: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, type_)
    except UnicodeEncodeError:  # a lone surrogate somewhere: clean this column only
        return pa.array(well_formed(values), type_)


def _struct(records: list, struct_type: pa.StructType, special: dict | None = None) -> pa.StructArray:
    """A struct column from model instances (None: a null struct); `special` maps a
    field name to a function of the record where the attribute is not the value."""
    special = special or {}
    nulls = [r is None for r in records]
    has_nulls = any(nulls)
    children = []
    for field in struct_type:
        get = special.get(field.name) or attrgetter(field.name)
        if has_nulls:
            values = [None if r is None else get(r) for r in records]
        else:
            values = list(map(get, records))
        # A nested record (an element's visibility) is a struct of its own.
        children.append(
            _struct(values, field.type) if pa.types.is_struct(field.type) else _column(values, field.type)
        )
    mask = pa.array(nulls, pa.bool_()) if has_nulls else None
    return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask)


def _elements(steps: list[Step]) -> pa.Array:
    offsets, flat = [0], []
    for s in steps:
        flat.extend(s.elements)
        offsets.append(len(flat))
    values = _struct(flat, ELEMENT_TYPE)
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), values, type=STEP_SCHEMA.field("elements").type
    )


_ACTION_SPECIAL = {"type": lambda a: a.type.value}
_STEP_SPECIAL = {
    "elements": _elements,
    "action": lambda steps: _struct([s.action for s in steps], ACTION_TYPE, _ACTION_SPECIAL),
    "target": lambda steps: _struct([s.target for s in steps], ELEMENT_TYPE),
}
_TASK_SPECIAL = {"params_json": lambda t: t.params_json()}
_TRAJECTORY_SPECIAL = {
    "task": lambda trajs: _struct([t.task for t in trajs], TASK_TYPE, _TASK_SPECIAL),
    "device": lambda trajs: _struct([t.device for t in trajs], DEVICE_TYPE),
}


def _records_table(records: list, schema: pa.Schema, special: dict) -> pa.Table:
    columns = []
    for field in schema:
        build = special.get(field.name)
        columns.append(
            build(records) if build else _column(list(map(attrgetter(field.name), records)), field.type)
        )
    return pa.Table.from_arrays(columns, schema=schema)


def steps_table(steps: Iterable[Step]) -> pa.Table:
    """The steps as a STEP_SCHEMA table (the rows of step_to_row, built by column)."""
    return _records_table(list(steps), STEP_SCHEMA, _STEP_SPECIAL)


def upgrade_trajectories(data: pa.Table | pa.RecordBatch) -> pa.Table:
    """Trajectory rows of any schema version as TRAJECTORY_SCHEMA (added columns null)."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    for field in TRAJECTORY_SCHEMA:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.select(TRAJECTORY_SCHEMA.names).cast(TRAJECTORY_SCHEMA)


def trajectories_table(trajs: Iterable[Trajectory]) -> pa.Table:
    """The trajectories as a TRAJECTORY_SCHEMA table (the rows of trajectory_to_row)."""
    return _records_table(list(trajs), TRAJECTORY_SCHEMA, _TRAJECTORY_SPECIAL)
