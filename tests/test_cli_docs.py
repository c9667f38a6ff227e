"""Every `trajforge ...` command line in README.md's and docs/*.md's code blocks names a
command that exists, with options that command takes, and its `--help` runs.

A line's command path is the words after `trajforge` that name groups and commands
(`train sft`); `sft|rl` stands for both. Its options are the `--words` on the line
(after `[` or before `=` too); a line continued with `\\` is read whole.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from trajforge.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _code_lines(text: str) -> list[str]:
    """The lines of fenced and indented code blocks, continuations joined."""
    lines, fenced, pending = [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            pending = ""
            continue
        line = pending + line.strip()
        pending = line[:-1] + " " if line.endswith("\\") else ""
        if not pending:
            lines.append(line)
    return lines


def documented_lines() -> list[tuple[str, str]]:
    """(where, the line) for every code line that runs `trajforge`."""
    found = []
    for doc in DOCS:
        for line in _code_lines(doc.read_text(encoding="utf-8")):
            line = line.removeprefix("$ ").split("  #")[0].strip()
            if line.startswith("trajforge "):
                found.append((doc.relative_to(ROOT).as_posix(), line))
    return found


def command_paths(words: list[str]) -> list[tuple[list[str], object]]:
    """The command paths the words name (one per alternative of `a|b`), with their click
    command (a group has `commands`; typer 0.29 carries its own click, so no isinstance)."""
    paths = [([], typer.main.get_command(app))]
    for word in words:
        if not all(hasattr(cmd, "commands") for _, cmd in paths):
            break
        names = word.split("|")
        if not all(name in paths[0][1].commands for name in names):
            break
        paths = [(path + [name], cmd.commands[name]) for path, cmd in paths for name in names]
    return paths


LINES = documented_lines()


def test_the_docs_have_command_lines():
    assert len(LINES) > 30 and {"README.md", "docs/training.md"} <= {where for where, _ in LINES}


@pytest.mark.parametrize("where, line", LINES, ids=[f"{w}:{line[:60]}" for w, line in LINES])
def test_a_documented_command_exists_and_takes_its_options(where, line):
    words = shlex.split(line)[1:]
    for path, command in command_paths(words):
        assert path and not hasattr(command, "commands"), f"{where}: no command in {line!r}"
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        unknown = sorted({o for o in OPTION.findall(line) if o not in known})
        assert not unknown, f"{where}: `trajforge {' '.join(path)}` takes no {unknown}"
        r = CliRunner().invoke(app, [*path, "--help"])
        assert r.exit_code == 0, r.output
