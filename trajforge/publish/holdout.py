"""Splits that hold out: whole task templates (and instructions) go to one split only.

DESIGN: "Splits hold out whole task templates (and unseen seeds); evaluation
runs on what training never saw." A trajectory's split is decided by its
*group*, not by its id:

- a task with a template: `template:<template_id>` (every language, every
  seed of the template goes where the template goes);
- a task without one (most imports): `instruction:<normalised instruction>`,
  so the same instruction is never in train and in test.

The group is hashed with the split seed (trajforge.publish.plan.split_of), so
adding data never moves a template to another split, and a held-out
template's seeds were never crawled for train: every trajectory of it is in
val or test.

An imported dataset that ships its own split (AndroidControl's train / val /
test, ...) keeps it: the importer writes it into the task's params as
`official_split`, and it wins over the hash when the set has a split of that
name (validation / valid / dev count as "val").

Seeds: crawls draw their task seeds below EVAL_SEED_BASE (trajforge.tasks.seeds);
online evaluation plays the held-out templates with seeds from
EVAL_SEED_BASE up, which no crawl uses.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from trajforge.publish.plan import split_of

OFFICIAL_SPLIT = "official_split"  # task params key an importer sets
SPLIT_BY = "template"  # in the export's options: a staging folder of another rule is not resumed
TRAIN = "train"
_ALIASES = {
    "validation": "val",
    "valid": "val",
    "dev": "val",
    "eval": "test",
    "testing": "test",
    "training": "train",
}
_SPACE = re.compile(r"\s+")


def normalise_instruction(text: str) -> str:
    """Case, width and spacing folded, trailing punctuation dropped: the same instruction
    written twice counts once."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    return _SPACE.sub(" ", text).strip().rstrip(".。!！?？ ")


def split_group(task: Any) -> str:
    """The unit a split holds out: the task's template, else its instruction."""
    template = getattr(task, "template_id", None)
    if template:
        return f"template:{template}"
    return f"instruction:{normalise_instruction(getattr(task, 'instruction', ''))}"


def official_split(task: Any, names: Iterable[str]) -> str | None:
    """The dataset's own split of an imported task, when the set has a split of that name."""
    params = getattr(task, "params", None) or {}
    value = params.get(OFFICIAL_SPLIT) if isinstance(params, dict) else None
    if not isinstance(value, str):
        return None
    value = value.strip().lower()
    value = _ALIASES.get(value, value)
    return value if value in set(names) else None


def split_for(task: Any, splits: Sequence[tuple[str, float]], seed: str) -> str:
    """The split of every trajectory of `task`: its official split, else its group's hash."""
    return official_split(task, [n for n, _ in splits]) or split_of(split_group(task), splits, seed)


class HoldOut:
    """Counts, while a set is written, which groups went to which split, for the manifest."""

    def __init__(self, splits: Sequence[tuple[str, float]], seed: str):
        self.splits, self.seed = list(splits), seed
        self.reset()

    def reset(self) -> None:
        self._key: dict[str, str] = getattr(self, "_key", {})
        self.templates: dict[str, set[str]] = {n: set() for n, _ in self.splits}
        self.instructions: dict[str, set[str]] = {n: set() for n, _ in self.splits}
        self.official: dict[str, int] = {n: 0 for n, _ in self.splits}

    def plan(self, tasks: Iterable[Any]) -> HoldOut:
        """Join groups that share an instruction (two templates worded alike, an import
        without a template asking what a template asks): a joined group goes to one
        split, keyed by its smallest template (else instruction), so no instruction
        straddles splits either. Without a plan each group goes its own way."""
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            parent.setdefault(x, x)
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for task in tasks:
            a = find(split_group(task))
            b = find(f"instruction:{normalise_instruction(getattr(task, 'instruction', ''))}")
            if a != b:  # a template names the joined group when it has one
                root, child = sorted((a, b), key=lambda g: (not g.startswith("template:"), g))
                parent[child] = root
        self._key = {g: find(g) for g in list(parent)}
        return self

    def split(self, task: Any) -> str:
        names = [n for n, _ in self.splits]
        official = official_split(task, names)
        if official is not None:
            return official
        group = split_group(task)
        return split_of(self._key.get(group, group), self.splits, self.seed)

    def add(self, task: Any, name: str) -> None:
        """Note that a trajectory of `task` was written to split `name`."""
        group = split_group(task)
        kind, _, value = group.partition(":")
        (self.templates if kind == "template" else self.instructions)[name].add(value)
        if official_split(task, self.templates) is not None:
            self.official[name] += 1

    def manifest(self) -> dict:
        """What the manifest says: the templates each evaluation split holds out."""
        return {
            "by": "task template, else normalised instruction; an import's official split wins",
            "templates": {n: sorted(v) for n, v in self.templates.items() if n != TRAIN},
            "template_counts": {n: len(v) for n, v in self.templates.items()},
            "instruction_counts": {n: len(v) for n, v in self.instructions.items()},
            "official_split_trajectories": self.official,
        }


def held_out_templates(
    template_ids: Iterable[str],
    splits: Sequence[tuple[str, float]],
    seed: str,
    among: Iterable[str] = ("test",),
) -> list[str]:
    """The templates of `template_ids` that the splits `among` hold out (never trained on)."""
    want = set(among)
    return sorted(t for t in set(template_ids) if split_of(f"template:{t}", splits, seed) in want)
