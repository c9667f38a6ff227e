"""How a training set is written: the model profile it is framed for and how it is cut
(splits, hold-out seed, shard limits); a reasoning set adds which steps go in. What the
Dagster assets' configs and the tests set; synthesis/set_writer.py and
grounding_writer.py take them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from schemas.model_profiles import DEFAULT_PROFILE, ModelProfile
from trajforge.publish.plan import DEFAULT_SPLITS, check_splits
from trajforge.publish.shard_set import SetLayout

from .reasoning_set import MAX_STEPS, MIN_STEPS


@dataclass(frozen=True)
class SetOptions:
    """`profile`: the schemas.model_profiles name or ModelProfile whose frame the images
    and coordinates are written in; `splits` [(name, fraction)], split by task template
    with `split_seed`; a shard holds at most `max_samples_per_shard` samples and
    `max_bytes_per_shard` bytes."""

    profile: str | ModelProfile = DEFAULT_PROFILE
    splits: Iterable[tuple[str, float]] = DEFAULT_SPLITS
    split_seed: str = "v1"
    max_samples_per_shard: int = 1000
    max_bytes_per_shard: int = 500_000_000

    def layout(self) -> SetLayout:
        return SetLayout(
            check_splits(self.splits), self.split_seed, self.max_samples_per_shard, self.max_bytes_per_shard
        )


@dataclass(frozen=True)
class ReasoningSetOptions(SetOptions):
    """`language` keeps only tasks in that language; `require_chinese_thought` drops a
    step whose thought is not Chinese (synthesis.language.is_chinese); trajectories of
    fewer than `min_steps` or more than `max_steps` steps (num_steps, as recorded) are
    skipped, counted."""

    language: str | None = None
    require_chinese_thought: bool = False
    min_steps: int = MIN_STEPS
    max_steps: int = MAX_STEPS
