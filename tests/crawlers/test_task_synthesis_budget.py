"""The synthesis budget (crawlers/task_synthesis.py): what is validated when not all can be."""

from __future__ import annotations

import pytest

from crawlers.task_synthesis import SynthesisSettings, round_robin


def row(task_id: str, steps: int) -> dict:
    return {"task_id": task_id, "params": {"walk_steps": list(range(steps))}}


def test_candidates_are_validated_round_robin_over_demonstration_lengths():
    rows = [row("a1", 1), row("a2", 1), row("a3", 1), row("b1", 2), row("c1", 3), row("c2", 5)]
    ordered = [r["task_id"] for r in round_robin(rows)]
    # One of each length first, in their order: a deadline that stops validation early
    # still leaves easy and hard tasks.
    assert ordered == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert round_robin([]) == [] and [r["task_id"] for r in rows] == ["a1", "a2", "a3", "b1", "c1", "c2"]


def test_settings_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="languages"):
        SynthesisSettings(minutes=1, languages=("fr",))
    with pytest.raises(ValueError, match="minutes"):
        SynthesisSettings(minutes=0)


def test_time_that_validating_every_candidate_leaves_unspent_goes_back_to_exploring():
    from crawlers.task_synthesis import more_exploration

    # 900 s left, 20 candidates at 4 s each (x 1.5 margin = 120 s): explore half of 780 s.
    assert more_exploration(900, 20, 4.0) == 390
    # The next round: what is left after it, with the candidates it added.
    assert more_exploration(480, 60, 4.0) == 60
    # Under a minute spare, or already short: validate.
    assert more_exploration(400, 60, 4.0) == 0
    assert more_exploration(100, 60, 4.0) == 0
