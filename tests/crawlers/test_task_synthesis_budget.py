"""The synthesis budget (crawlers/task_synthesis.py): what is validated when not all can be."""

from __future__ import annotations

import pytest

from crawlers.task_synthesis import SynthesisSettings, within_budget


def row(task_id: str, steps: int) -> dict:
    return {"task_id": task_id, "params": {"walk_steps": list(range(steps))}}


def test_the_budget_takes_candidates_round_robin_over_demonstration_lengths():
    rows = [row("a1", 1), row("a2", 1), row("a3", 1), row("b1", 2), row("c1", 3), row("c2", 5)]
    chosen = [r["task_id"] for r in within_budget(rows, seconds_left=40, per_candidate_s=10)]
    assert chosen == ["a1", "b1", "c1", "a2"]  # one of each length first, in their order
    everything = within_budget(rows, seconds_left=1e6, per_candidate_s=10)
    assert sorted(r["task_id"] for r in everything) == sorted(r["task_id"] for r in rows)
    assert [r["task_id"] for r in within_budget(rows, seconds_left=-5, per_candidate_s=10)] == ["a1"]


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
