"""OpenCUA AgentNet trajectories (github.com/xlang-ai/OpenCUA): desktop tasks as pyautogui code.

Two shapes:
A. The AgentNet trajectory (JSONL, one task per line; the CoT generator's
   input): `{task_id, instruction, traj: [{index, image, value: {code, and
   after the CoT pass observation, thought, action, ...}}]}`.
B. AgentNetBench (one JSON file per task): `{task_id, user_task_description,
   meta_info: {system, screen_resolution: {width, height}}, steps:
   [{step_num, image, action (code), inner_monologue: {thought, ...},
   ground_truth_actions: [{type, params, metadata: {bboxes: [{rel_bbox}]}}],
   alternative_options: [[{type, params, ...}], ...]}]}`.

Quirks handled:
- `code` is pyautogui with **normalised 0-1 coordinates**, read with `ast`
  (literal arguments only, never executed); one step may hold several
  newline-joined calls: moveTo + dragTo is one swipe (a drag), moveTo +
  scroll(n) one scroll at that point (n < 0: down), moveTo + click() a tap
  there, mouseDown ... mouseUp a drag; any other calls become one step each
  on the same screenshot. A lone moveTo is a wait at that point ("move_to").
- click -> tap, doubleClick / tripleClick -> double_tap, rightClick (and
  click(button='right')) -> right_click, write / typewrite -> type, hotkey ->
  one key chord in schemas.keys' canonical form (['ctrl', 'F'] -> "ctrl+f"),
  press -> one key action per key pressed (press(['a', 'b']) presses a, then
  b), scroll(n) -> scroll with amount |n| wheel notches (n < 0: down),
  `computer.terminate(status=...)` -> done, and the status is the outcome.
- AgentNetBench steps are read from `ground_truth_actions` (`{type, params:
  {position: {x, y}, text, keys, amount, status}}`, the same calls as the
  code); the `action` code is read only where a step has none. The two
  disagree on real records (step 5 of s_5473959e0f6e21f7 types
  "help me polish this: " while its code ends in a stray quote).
- Kept in the task's params (the record's JSON field for what the schema has
  no column for): `step_nums`, the AgentNetBench step number of each imported
  step in order (a bench step of several actions gives several steps), and
  `alternative_options` {step_num: the record's alternatives, as given} for
  the steps that have any.
- AgentNetBench's `step_num` is not contiguous (steps were dropped): its
  trajectories keep the steps given, in order, with outcome "unknown" when
  numbers are missing (the sequence is not the whole demonstration).
  `rel_bbox` [x, y, w, h] (0-1) of the first ground-truth action is the target.

Platform: the record schema has no desktop platform; these import as "web"
with device name "desktop-<system>". Screen size: the screenshot next to the
file, else `meta_info.screen_resolution`, else the caller's `screen_size`;
AgentNetBench's screenshots are smaller than the screen (1280x720 for a
1920x1080 screen): a step without its image takes the size its boxes state
(abs_bbox / rel_bbox), else another image's. The raw JSONL states none, and
its images are large (not in the samples).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schemas.actions import Action, ActionType
from schemas.converters import make_action
from schemas.errors import SchemaError
from schemas.keys import canonical_or_raw
from schemas.records import Element
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Draft,
    Episode,
    Importer,
    bad,
    locate_image,
    number,
    numbers,
    read_records,
    require,
)

_CLICKS = {
    "click": (ActionType.TAP, None),
    "leftClick": (ActionType.TAP, None),
    "doubleClick": (ActionType.DOUBLE_TAP, None),
    "tripleClick": (ActionType.DOUBLE_TAP, "triple_click"),
    "rightClick": (ActionType.RIGHT_CLICK, None),
}


class AgentNetImporter(Importer):
    name = "agentnet"

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        for label, rec in read_records(file):
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            where = f"task {rec.get('task_id')}" if isinstance(rec, dict) and rec.get("task_id") else label
            try:
                if not isinstance(rec, dict):
                    raise SchemaError(f"a {type(rec).__name__}, not a task object", field="task_id")
                yield self._bench(file, rec) if "steps" in rec else self._raw(file, rec)
            except RECORD_ERRORS as err:
                yield bad(err, file, where, rec)

    def _raw(self, file: Path, rec: dict) -> Episode:
        task_id = require(rec, "task_id", (str, int))
        steps = sorted(
            require(rec, "traj", list), key=lambda s: s.get("index", 0) if isinstance(s, dict) else 0
        )
        drafts, status = [], None
        for i, s in enumerate(steps):
            try:
                value = require(s, "value", dict)
                actions, st = parse_code(require(value, "code", str, field="value.code"))
            except SchemaError as err:
                raise SchemaError(err.reason, field=f"traj[{i}].{err.field}") from None
            status = st or status
            image = locate_image(file.parent, s.get("image"))
            for a in actions:
                drafts.append(
                    Draft(
                        make=(lambda a: lambda w, h: (a, None, []))(a),
                        image=image,
                        thought=value.get("thought") or None,
                    )
                )
        return Episode(
            episode_id=str(task_id),
            instruction=require(rec, "instruction", str),
            drafts=drafts,
            platform="web",
            device_name="desktop",
            outcome=_outcome(status),
        )

    def _bench(self, file: Path, rec: dict) -> Episode:
        task_id = require(rec, "task_id", (str, int))
        meta = rec.get("meta_info") or {}
        res = meta.get("screen_resolution") or {}
        size = None
        if res:
            size = (
                int(number(res.get("width"), field="meta_info.screen_resolution.width")),
                int(number(res.get("height"), field="meta_info.screen_resolution.height")),
            )
        steps = sorted(
            require(rec, "steps", list), key=lambda s: s.get("step_num", 0) if isinstance(s, dict) else 0
        )
        drafts, status, nums, step_nums, alternatives = [], None, [], [], {}
        for i, s in enumerate(steps):
            try:
                num = require(s, "step_num", int)
                nums.append(num)
                gt = s.get("ground_truth_actions")
                if isinstance(gt, list) and gt:
                    actions, st = parse_ground_truth(gt)
                else:
                    actions, st = parse_code(require(s, "action", str))
                target = _target(gt)
                shot_size = _size(gt)
            except SchemaError as err:
                raise SchemaError(err.reason, field=f"steps[{i}].{err.field}") from None
            status = st or status
            if s.get("alternative_options"):
                alternatives[str(num)] = s["alternative_options"]
            mono = s.get("inner_monologue") or {}
            image = locate_image(file.parent, s.get("image")) or locate_image(
                file.parent, f"images/{s.get('image')}"
            )
            for a in actions:
                step_nums.append(num)
                drafts.append(
                    Draft(
                        make=(lambda a, t: lambda w, h: (a, t, []))(a, target),
                        image=image,
                        size=shot_size,
                        thought=mono.get("thought") or None,
                    )
                )
        params: dict[str, Any] = {"step_nums": step_nums}
        if alternatives:
            params["alternative_options"] = alternatives
        gaps = nums != list(range(nums[0], nums[0] + len(nums))) if nums else False
        system = str(meta.get("system") or "").lower()
        return Episode(
            episode_id=str(task_id),
            instruction=require(rec, "user_task_description", str),
            drafts=drafts,
            platform="web",
            device_size=size,
            device_name=f"desktop-{system}" if system else "desktop",
            app=", ".join(meta.get("websites") or meta.get("applications") or []),
            outcome="unknown" if gaps or (nums and nums[0] > 1) else _outcome(status),
            params=params,
        )


def _outcome(status: str | None) -> str:
    return {"success": "success", "failure": "failure", "fail": "failure"}.get(status or "", "unknown")


def _boxes(gt: Any) -> Iterator[dict]:
    for a in gt if isinstance(gt, list) else []:
        for b in ((a or {}).get("metadata") or {}).get("bboxes") or []:
            if isinstance(b, dict):
                yield b


def _size(gt: Any) -> tuple[int, int] | None:
    """The screenshot's size as the record states it: abs_bbox / rel_bbox of a box."""
    for b in _boxes(gt):
        if b.get("rel_bbox") is not None and b.get("abs_bbox") is not None:
            rel = numbers(b["rel_bbox"], 4, field="ground_truth_actions.rel_bbox")
            ab = numbers(b["abs_bbox"], 4, field="ground_truth_actions.abs_bbox")
            if rel[2] > 0 and rel[3] > 0:
                return round(ab[2] / rel[2]), round(ab[3] / rel[3])
    return None


def _target(gt: Any) -> Element | None:
    for b in _boxes(gt):
        if b.get("rel_bbox") is not None:
            x, y, w, h = numbers(b["rel_bbox"], 4, field="ground_truth_actions.rel_bbox")
            c = lambda v: min(max(v, 0.0), 1.0)  # noqa: E731
            return Element(role="element", bbox=(c(x), c(y), c(x + w), c(y + h)))
    return None


def _calls(code: str) -> list[tuple[str, list, dict]]:
    try:
        tree = ast.parse(code.strip())
    except SyntaxError as exc:
        raise SchemaError(f"not Python: {exc.msg}", field="code") from None
    out = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in ("pyautogui", "computer")
        ):
            raise SchemaError(f"not a pyautogui/computer call: {ast.unparse(node)[:60]!r}", field="code")
        try:
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        except (ValueError, SyntaxError):
            raise SchemaError(
                f"arguments are not literals: {ast.unparse(call)[:60]!r}", field="code"
            ) from None
        out.append((call.func.attr, args, kwargs))
    return out


def _xy(args: list, kw: dict, fn: str) -> tuple[float, float] | None:
    x = kw.get("x", args[0] if len(args) > 0 else None)
    y = kw.get("y", args[1] if len(args) > 1 else None)
    if x is None and y is None:
        return None
    x, y = number(x, field=f"code.{fn}.x"), number(y, field=f"code.{fn}.y")
    if not (0 <= x <= 1 and 0 <= y <= 1):
        raise SchemaError(f"({x}, {y}) is not a normalised 0-1 point", field=f"code.{fn}")
    return x, y


# ground_truth_actions params -> the keyword arguments of the pyautogui call.
_GT_PARAMS = {"text": "message", "amount": "clicks"}


def _gt_calls(gt: list) -> list[tuple[str, list, dict]]:
    calls = []
    for k, a in enumerate(gt):
        where = f"ground_truth_actions[{k}]"
        if not isinstance(a, dict) or not isinstance(a.get("type"), str):
            raise SchemaError(f"{a!r} is not an action {{type, params}}", field=where)
        params = a.get("params") or {}
        if not isinstance(params, dict):
            raise SchemaError(f"{params!r} is not an object", field=f"{where}.params")
        kw = {_GT_PARAMS.get(key, key): v for key, v in params.items() if key != "position"}
        pos = params.get("position")
        if pos is not None:
            if not isinstance(pos, dict):
                raise SchemaError(f"{pos!r} is not {{x, y}}", field=f"{where}.params.position")
            kw["x"], kw["y"] = pos.get("x"), pos.get("y")
        calls.append((a["type"], [], kw))
    return calls


def parse_ground_truth(gt: list) -> tuple[list[Action], str | None]:
    """Canonical actions of one AgentNetBench step's `ground_truth_actions`, and the
    terminate status if any (the same calls as the code, as structured data)."""
    try:
        return _parse_calls(_gt_calls(gt))
    except SchemaError as err:
        field = err.field or ""
        if field.startswith("code"):
            field = "ground_truth_actions" + field[len("code") :]
        raise SchemaError(err.reason, field=field) from None


def _key_names(keys: Any, fn: str) -> list[str]:
    keys = [keys] if isinstance(keys, str) else keys
    if not keys or not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
        raise SchemaError(f"{keys!r} are not key names", field=f"code.{fn}")
    return list(keys)


def parse_code(code: str) -> tuple[list[Action], str | None]:
    """Canonical actions of one step's pyautogui code, and the terminate status if any."""
    return _parse_calls(_calls(code))


def _parse_calls(calls: list[tuple[str, list, dict]]) -> tuple[list[Action], str | None]:
    actions: list[Action] = []
    cursor = None  # where the last moveTo left the pointer, not yet used
    pressed = None  # where mouseDown happened
    status = None
    for fn, args, kw in calls:
        if fn == "moveTo":
            if cursor is not None:
                actions.append(
                    make_action(type=ActionType.WAIT, x=cursor[0], y=cursor[1], description="move_to")
                )
            cursor = _xy(args, kw, fn)
            continue
        if fn in _CLICKS:
            p = _xy(args, kw, fn) or cursor
            if p is None:
                raise SchemaError(f"{fn} without a point", field=f"code.{fn}")
            t, desc = _CLICKS[fn]
            if fn == "click" and kw.get("clicks", 1) == 2:
                t = ActionType.DOUBLE_TAP
            if fn == "click" and kw.get("button") == "right":
                t, desc = ActionType.RIGHT_CLICK, None
            actions.append(make_action(type=t, x=p[0], y=p[1], description=desc))
        elif fn == "dragTo":
            end = _xy(args, kw, fn)
            if cursor is None or end is None:
                raise SchemaError("dragTo needs a moveTo before it and an end point", field="code.dragTo")
            actions.append(
                make_action(
                    type=ActionType.SWIPE, x=cursor[0], y=cursor[1], x2=end[0], y2=end[1], description="drag"
                )
            )
        elif fn == "mouseDown":
            pressed = _xy(args, kw, fn) or cursor
        elif fn == "mouseUp":
            end = _xy(args, kw, fn) or cursor
            if pressed is None or end is None:
                raise SchemaError("mouseUp without mouseDown", field="code.mouseUp")
            actions.append(
                make_action(
                    type=ActionType.SWIPE,
                    x=pressed[0],
                    y=pressed[1],
                    x2=end[0],
                    y2=end[1],
                    description="drag",
                )
            )
            pressed = None
        elif fn in ("scroll", "vscroll", "hscroll"):
            n = number(kw.get("clicks", args[0] if args else None), field=f"code.{fn}")
            if n == 0:
                raise SchemaError("a scroll by 0", field=f"code.{fn}")
            direction = ("down" if n < 0 else "up") if fn != "hscroll" else ("left" if n < 0 else "right")
            # scroll(clicks, x=None, y=None): the point is a keyword (or where moveTo left it).
            at = (
                kw.get("x", args[1] if len(args) > 2 else None),
                kw.get("y", args[2] if len(args) > 2 else None),
            )
            p = (_xy(list(at), {}, fn) if at != (None, None) else None) or cursor or (None, None)
            actions.append(
                make_action(
                    type=ActionType.SCROLL,
                    direction=direction,
                    x=p[0],
                    y=p[1],
                    amount=abs(n),
                    description=f"{fn}({n:g})",
                )
            )
        elif fn in ("write", "typewrite"):
            text = kw.get("message", args[0] if args else None)
            if not isinstance(text, str):
                raise SchemaError(f"{text!r} is not text", field=f"code.{fn}")
            actions.append(make_action(type=ActionType.TYPE, text=text))
        elif fn == "hotkey":  # one chord: hotkey('ctrl', 'c') or hotkey(keys=[...])
            keys = _key_names(kw.get("keys", args[0] if len(args) == 1 else args), fn)
            actions.append(
                make_action(type=ActionType.KEY, text=canonical_or_raw("+".join(keys), keyboard=True))
            )
        elif fn == "press":  # press('a') / press(['a', 'b']): one key after the other
            keys = _key_names(kw.get("keys", args[0] if args else None), fn)
            presses = kw.get("presses", args[1] if len(args) > 1 else 1)
            if not isinstance(presses, int) or isinstance(presses, bool) or presses < 1:
                raise SchemaError(f"presses={presses!r} is not a positive count", field=f"code.{fn}")
            for _ in range(presses):
                for k in keys:
                    actions.append(make_action(type=ActionType.KEY, text=canonical_or_raw(k, keyboard=True)))
        elif fn == "terminate":
            status = kw.get("status", args[0] if args else None)
            actions.append(
                make_action(type=ActionType.DONE, text=status if isinstance(status, str) else None)
            )
        elif fn == "wait":
            actions.append(make_action(type=ActionType.WAIT))
        else:
            raise SchemaError(f"unknown call {fn!r}", field="code")
        cursor = None
    if cursor is not None:
        actions.append(make_action(type=ActionType.WAIT, x=cursor[0], y=cursor[1], description="move_to"))
    if not actions:
        raise SchemaError("no action", field="code")
    return actions, status
