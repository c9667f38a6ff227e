"""The stage interface: a Pipeline chains stages' runs and reports each one's own stats."""

from __future__ import annotations

from filters.stages.base import Pipeline, Stage


class Evens(Stage):
    """Passes the even numbers on; counts what came in and what it dropped."""

    name = "evens"

    def __init__(self):
        self.seen = self.dropped = 0

    def run(self, items):
        for n in items:
            self.seen += 1
            if n % 2:
                self.dropped += 1
                continue
            yield n

    def stats(self):
        return {"in": self.seen, "dropped": self.dropped}


class Squares(Stage):
    name = "squares"

    def __init__(self):
        self.done = 0

    def run(self, items):
        for n in items:
            self.done += 1
            yield n * n

    def stats(self):
        return {"squared": self.done}


def test_a_pipeline_chains_the_runs_and_reports_each_stages_own_stats():
    pipeline = Pipeline([Evens(), Squares()])
    assert list(pipeline.run(range(7))) == [0, 4, 16, 36]
    assert pipeline.counts() == {"evens": {"in": 7, "dropped": 3}, "squares": {"squared": 4}}


def test_a_pipeline_runs_lazily():
    pipeline = Pipeline([Evens(), Squares()])
    stream = pipeline.run(range(7))
    assert pipeline.counts() == {"evens": {"in": 0, "dropped": 0}, "squares": {"squared": 0}}
    next(stream)
    assert pipeline.counts()["squares"] == {"squared": 1}


def test_each_curation_stage_passes_on_what_came_in(curated):
    """What one stage counts out, the next counts in: in = kept + dropped."""
    c = curated.counts
    steps_in, trajectories_in = c["score"]["steps"], c["score"]["trajectories"]
    decide = c["decide"]
    assert steps_in == decide["steps_kept"] + sum(decide["steps_dropped"].values())
    assert trajectories_in == decide["trajectories_kept"] + sum(decide["trajectories_dropped"].values())
    assert c["read"]["trajectories"] == trajectories_in
    assert c["write"]["step_rows"] == steps_in
    assert (c["write"]["trajectories"], c["write"]["steps"]) == (
        decide["trajectories_kept"],
        decide["steps_kept"],
    )
