"""Open-AutoGLM (github.com/zai-org/Open-AutoGLM) conversations -> trajectories.

Open-AutoGLM publishes no trajectory dataset; what exists is the agent's
chat context: OpenAI-style messages, `[{"role": "system", ...}, {"role":
"user", "content": [{"type": "image_url", "image_url": {"url":
"data:image/png;base64,..."}}, {"type": "text", "text": task}]},
{"role": "assistant", "content": "<think>...</think><answer>ACTION"}, ...]`
(`scripts/sample_messages_en.json` is the first user turn of one). A record
is one conversation: such a list, or `{"id" | "episode_id", "messages": [...]}`,
in a .json file or one per .jsonl line.

Each assistant turn is a step: its action is parsed by
`schemas.converters.autoglm.parse_autoglm` (0-999 grid, "Long Press" /
"Double Tap" with spaces, Type's raw text, Type_Name / Interact / Note /
Call_API, `finish(message=...)`), its `<think>` is the thought, and its
screenshot is the last image of the user turns before it (a data: URL, or a
file path looked up next to the file). The task is the first user text.

The agent strips images from older turns to save context, so a step may
have no image: it then gets the size of another image of the conversation,
else the caller's `screen_size`. A data URL that is not valid base64 (e.g.
the truncated sample) is an error for the conversation. Outcome: "success"
when the last action is finish(...), else "unknown" (a context may stop mid-task).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schemas.actions import ActionType
from schemas.converters.autoglm import parse_autoglm
from schemas.errors import SchemaError
from trajforge.importers.base import (
    RECORD_ERRORS,
    Context,
    Draft,
    Episode,
    Importer,
    bad,
    locate_image,
    read_records,
)


class AutoGLMImporter(Importer):
    name = "autoglm"

    def episodes(self, file: Path, ctx: Context) -> Iterator[Episode | SchemaError]:
        records = list(read_records(file))
        if (
            file.suffix == ".json"
            and records
            and all(isinstance(r, dict) and "role" in r for _, r in records)
        ):
            records = [("file", [r for _, r in records])]  # the file is one conversation
        for label, rec in records:
            if isinstance(rec, SchemaError):
                yield bad(rec, file, label)
                continue
            ep_id = file.stem if label == "file" else f"{file.stem}:{label}"
            messages = rec
            if isinstance(rec, dict):
                ep_id = str(rec.get("id") or rec.get("episode_id") or ep_id)
                messages = rec.get("messages")
            try:
                yield _episode(file, ep_id, messages)
            except RECORD_ERRORS as err:
                yield bad(err, file, f"conversation {ep_id}", rec)


def _episode(file: Path, ep_id: str, messages: Any) -> Episode:
    if not isinstance(messages, list) or not messages:
        raise SchemaError("not a list of chat messages", field="messages")
    task, image, drafts, last = None, None, [], None
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise SchemaError(f"{str(m)[:60]!r} is not a chat message", field=f"messages[{i}].role")
        if m["role"] == "user":
            for part in (
                m.get("content")
                if isinstance(m.get("content"), list)
                else [{"type": "text", "text": m.get("content")}]
            ):
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "image_url":
                    image = _image(file, part.get("image_url"), f"messages[{i}].image_url")
                elif part.get("type") == "text" and task is None and isinstance(part.get("text"), str):
                    task = part["text"].strip() or None
        elif m["role"] == "assistant":
            content = m.get("content")
            if not isinstance(content, str):
                raise SchemaError(f"{content!r} is not text", field=f"messages[{i}].content")
            try:
                action, thought = parse_autoglm(content)
            except SchemaError as err:
                raise SchemaError(err.reason, field=f"messages[{i}].{err.field}") from None
            drafts.append(
                Draft(
                    make=(lambda a: lambda w, h: (a, None, []))(action),
                    image=image,
                    thought=thought.strip() if thought else None,
                )
            )
            image, last = None, action
    if task is None:
        raise SchemaError("no user text: the task is unknown", field="messages")
    if not drafts:
        raise SchemaError("no assistant turn: the conversation has no action", field="messages")
    return Episode(
        episode_id=ep_id,
        instruction=task,
        drafts=drafts,
        outcome="success" if last.type == ActionType.DONE else "unknown",
    )


def _image(file: Path, obj: Any, field: str) -> Path | bytes | None:
    url = obj.get("url") if isinstance(obj, dict) else obj
    if not isinstance(url, str):
        raise SchemaError(f"{obj!r} has no url", field=field)
    if url.startswith("data:"):
        try:
            return base64.b64decode(url.split(",", 1)[1], validate=True)
        except (binascii.Error, ValueError, IndexError):
            raise SchemaError("the data URL is not valid base64 (truncated?)", field=field) from None
    return locate_image(file.parent, url)
