"""Which task seeds a crawl draws, and which ones only evaluation plays.

- The manual catalog (task_catalog, `seed` 0 by default) uses seeds from 0.
- A scheduled crawl draws its seeds from the schedule's date: day d (days
  since EPOCH) gets seeds DAILY_SEED_BASE + d * per_template + i, i <
  per_template, so each day's tasks are new (their task ids, and so the
  crawl's resume keys, differ from every other day's) and tick 2 adds data.
- Seeds from EVAL_SEED_BASE up are never crawled: online evaluation plays the
  held-out templates (trajforge.publish.holdout) with them, so it sees neither a
  template nor a seed that training saw.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

EPOCH = dt.date(2025, 1, 1)
DAILY_SEED_BASE = 1_000
EVAL_SEED_BASE = 1_000_000_000


def day_index(day: dt.date | dt.datetime | str) -> int:
    if isinstance(day, str):
        day = dt.date.fromisoformat(day[:10])
    if isinstance(day, dt.datetime):
        day = day.date()
    return (day - EPOCH).days


def daily_seed(day: dt.date | dt.datetime | str, per_template: int = 1) -> int:
    """The first task seed of `day`'s crawl (its tasks use per_template seeds from it)."""
    if per_template < 1:
        raise ValueError(f"per_template={per_template} must be >= 1")
    seed = DAILY_SEED_BASE + max(day_index(day), 0) * per_template
    if seed + per_template > EVAL_SEED_BASE:
        raise ValueError(f"{day}: daily seeds would reach the evaluation seeds ({EVAL_SEED_BASE})")
    return seed


def check_crawl_seed(seed: int) -> int:
    if not 0 <= seed < EVAL_SEED_BASE:
        raise ValueError(
            f"task seed {seed}: crawls use seeds in [0, {EVAL_SEED_BASE}); "
            "the ones above are kept for online evaluation"
        )
    return seed


def reseeded(tasks: Iterable[Any], seed: int, make_task: Callable[[str, str, int], Any]) -> list[Any]:
    """The catalog's tasks drawn again from `seed`: for each (template, language) of the
    catalog as many tasks as it holds there, with seeds seed, seed + 1, ...
    `make_task(template_id, language, seed)` builds one (sandbox: TaskTemplate.make_task)."""
    check_crawl_seed(seed)
    counts: dict[tuple[str, str], int] = {}
    for t in tasks:
        counts[(t.template_id, t.language)] = counts.get((t.template_id, t.language), 0) + 1
    return [make_task(template, lang, seed + i) for (template, lang), n in counts.items() for i in range(n)]
