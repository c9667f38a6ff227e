"""The import inbox: inbox/<format>/<file or folder>, each imported once per content.

A ledger (inbox/.ledger.json) maps each entry to the sha256 of its bytes, so a
scheduled or sensor-triggered run imports only what is new or changed; the
importers' stable trajectory ids make a re-import of a changed file add no
duplicates. Bad records go to quarantine/import/<format>.jsonl with their reason.
Options for a format's entries sit beside them in inbox/<format>/.options.json,
e.g. {"screen_size": [1080, 2400]} for datasets whose records state no screen
size and whose images are absent (the size is never guessed).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from schemas.errors import SchemaError
from trajforge.store.raw import RawStore, atomic_write_bytes

LEDGER = ".ledger.json"


def inbox_entries(inbox: Path) -> Iterator[tuple[str, Path]]:
    """(format, path) of every file or folder directly under inbox/<format>/, sorted."""
    inbox = Path(inbox)
    if not inbox.is_dir():
        return
    for fmt_dir in sorted(p for p in inbox.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for entry in sorted(fmt_dir.iterdir()):
            if not entry.name.startswith("."):
                yield fmt_dir.name, entry


def content_sha256(path: Path) -> str:
    """sha256 over a file's bytes, or over a folder's files (relative names and bytes)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(f.relative_to(path.parent).as_posix().encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def inbox_signature(inbox: Path) -> str:
    """A cheap fingerprint of the inbox (names, sizes, mtimes) for a sensor's cursor."""
    h = hashlib.sha256()
    for fmt, entry in inbox_entries(inbox):
        files = [entry] if entry.is_file() else sorted(p for p in entry.rglob("*") if p.is_file())
        for f in files:
            st = f.stat()
            h.update(f"{fmt}/{f.relative_to(entry.parent)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def format_options(fmt_dir: Path) -> dict:
    """The keyword options of inbox/<format>/.options.json (only screen_size so far)."""
    path = fmt_dir / ".options.json"
    if not path.exists():
        return {}
    try:
        opts = json.loads(path.read_text())
        size = opts.get("screen_size")
        if size is None:
            return {}
        w, h = (int(v) for v in size)
        if w <= 0 or h <= 0:
            raise ValueError(f"screen_size {size} must be positive")
    except (ValueError, TypeError, AttributeError) as e:
        raise SchemaError(f"bad import options: {e}", source=str(path), field="screen_size") from None
    return {"screen_size": (w, h)}


def import_inbox(
    inbox: Path, store: RawStore, *, quarantine_dir: Path | None = None, log: Callable[[str], None] = print
) -> dict:
    from trajforge.importers import IMPORTERS, import_path

    inbox = Path(inbox)
    quarantine_dir = Path(quarantine_dir or store.root.parent / "quarantine" / "import")
    ledger_path = inbox / LEDGER
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    out = {
        "files_imported": 0,
        "files_unchanged": 0,
        "trajectories": 0,
        "task_rows": 0,
        "steps": 0,
        "quarantined": 0,
        "by_format": {},
        "unknown_formats": [],
    }
    by_format: dict[str, Counter] = {}
    for fmt, entry in inbox_entries(inbox):
        if fmt not in IMPORTERS:
            if fmt not in out["unknown_formats"]:
                out["unknown_formats"].append(fmt)
                log(f"inbox/{fmt}: no importer of that name (known: {', '.join(sorted(IMPORTERS))})")
            continue
        name = f"{fmt}/{entry.name}"
        sha = content_sha256(entry)
        if ledger.get(name) == sha:
            out["files_unchanged"] += 1
            continue
        res = import_path(
            fmt, entry, store, quarantine_path=quarantine_dir / f"{fmt}.jsonl", **format_options(inbox / fmt)
        )
        kind = "task_rows" if res.tasks_path else "trajectories"  # task tables hold no steps
        log(
            f"imported {name}: {res.imported} {kind}, {res.steps} steps, "
            f"{res.quarantined} quarantined, {res.skipped} already there"
        )
        c = by_format.setdefault(fmt, Counter())
        c.update(
            {
                kind: res.imported,
                "steps": res.steps,
                "quarantined": res.quarantined,
                "skipped": res.skipped,
                "files": 1,
            }
        )
        out["files_imported"] += 1
        out[kind] += res.imported
        out["steps"] += res.steps
        out["quarantined"] += res.quarantined
        ledger[name] = sha
        # The ledger is written after each entry: a killed run re-imports at most one.
        atomic_write_bytes(ledger_path, json.dumps(ledger, indent=1, sort_keys=True).encode())
    out["by_format"] = {k: dict(v) for k, v in sorted(by_format.items())}
    return out


def default_inbox() -> Path:
    return Path(os.environ.get("TRAJFORGE_DATA", "data")).resolve() / "inbox"
