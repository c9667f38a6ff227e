"""Task, Step and Trajectory records: the data contract every stage speaks.

Records are pydantic models (validation with the field named); `arrow.py`
holds their Arrow schemas and the row conversion used for Parquet.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .actions import Action
from .provenance import build_id

# 1.1: trajectories gained reward, verifier and verifier_reason (parts written
# at 1.0 read with those null: schemas.arrow.upgrade_trajectories).
# 1.2: steps gained probes_json (parts written before read it as null).
SCHEMA_VERSION = "1.2"
# The code a record was made with: the package version and its git commit,
# "0.1.0+g<12 hex>" (schemas.provenance.build_id; "0.1.0" outside a checkout
# without $TRAJFORGE_GIT_COMMIT).
PIPELINE_VERSION = build_id()

# Integer fields are int32 / int64 columns in Parquet (schemas.arrow): a record
# that validates must also be writable.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

Language = Literal["en", "zh"]
# "mobile_web": a phone emulated in Chromium and driven through Appium (touch events,
# mobile viewport); "android"/"ios": a real device or emulator through Appium.
Platform = Literal["web", "mobile_web", "android", "ios", "desktop"]
Policy = Literal["oracle", "random_walk", "frontier", "replay", "agent", "imported"]
Outcome = Literal["success", "failure", "error", "unknown"]
# Where a trajectory comes from: a crawl, an imported dataset, or a rollout of a policy
# that drove an environment through the Gym API (trajforge.envs). Crawls and rollouts
# are played live; imports are not.
Source = Literal["crawl", "import", "rollout"]
LIVE_SOURCES = ("crawl", "rollout")
# The verifiers an environment file may name (schemas.environment.VerifierSpec.kind).
VerifierKind = Literal["state", "js", "http", "python", "judge", "command", "predicates"]
VERIFIER_KINDS: tuple[str, ...] = get_args(VerifierKind)
# Who decided the outcome: a verifier of one of those kinds, a dataset's own label
# (imported data: the source says so, nobody checked), or nobody.
VerifiedBy = VerifierKind | Literal["dataset", "none"]


def is_verified(verified_by: str | None) -> bool:
    """A verifier's verdict decided the outcome (any kind: state, js, http, python,
    judge). A dataset's own label is not a verdict. The one rule every count of
    "verified" uses: crawl figures, stats, the report, difficulty."""
    return verified_by in VERIFIER_KINDS


def is_verified_success(outcome: str | None, verified_by: str | None) -> bool:
    """A success that a verifier decided (see `is_verified`)."""
    return outcome == "success" and is_verified(verified_by)


class Visibility(BaseModel):
    """Measured at capture time by hit-testing the live screen (crawlers.visibility)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on_screen: bool  # the box intersects the viewport
    visible_fraction: float = Field(ge=0, le=1)  # share of the box's area inside the viewport
    # Share of the probe points (centre + 4 inner points) that hit-test to the
    # element itself or a descendant.
    hit_fraction: float = Field(ge=0, le=1)
    centre_hit: bool  # the centre hit-tests to the element or a descendant
    modal_covered: bool  # a modal/dialog/overlay that is not an ancestor covers the centre

    @property
    def is_target(self) -> bool:
        """The only elements a grounding sample may point at."""
        return self.on_screen and self.centre_hit and not self.modal_covered and self.visible_fraction >= 0.99


class Element(BaseModel):
    """An element of the screen: role, accessible name and its normalised box."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    name: str = ""
    bbox: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1 in [0,1]
    # None: not measured (imported screens, records written before it existed).
    visibility: Visibility | None = None

    @field_validator("bbox")
    @classmethod
    def _bbox_ok(cls, v):
        if v is None:
            return v
        if not all(math.isfinite(c) for c in v):
            raise ValueError(f"bbox {v} has a non-finite coordinate")
        x0, y0, x1, y1 = v
        if x1 < x0 or y1 < y0:
            raise ValueError(f"bbox {v} has x1<x0 or y1<y0")
        return v

    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.bbox
        return (x0 + x1) / 2, (y0 + y1) / 2

    def contains(self, x: float, y: float) -> bool:
        if self.bbox is None:
            return False
        x0, y0, x1, y1 = self.bbox
        return x0 <= x <= x1 and y0 <= y <= y1


class Task(BaseModel):
    """What to do: an instruction in one language, from a template and parameters."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    instruction: str = Field(min_length=1)
    language: Language
    app: str
    template_id: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    start_url: str | None = None

    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True, ensure_ascii=False)


class DeviceProfile(BaseModel):
    """The screen a trajectory was recorded on, and its domain randomisation."""

    model_config = ConfigDict(extra="forbid")

    name: str = "desktop"
    viewport_width: int = Field(gt=0, le=INT32_MAX)
    viewport_height: int = Field(gt=0, le=INT32_MAX)
    pixel_ratio: float = Field(default=1.0, gt=0)
    is_mobile: bool = False
    locale: str = "en-US"
    theme: Literal["light", "dark"] = "light"
    font_scale: float = Field(default=1.0, gt=0)


class Step(BaseModel):
    """One observation and the action taken on it."""

    model_config = ConfigDict(extra="forbid")

    trajectory_id: str
    index: int = Field(ge=0, le=INT32_MAX)
    # Empty only for an imported record whose dataset ships no image for the step
    # (curation drops such steps as missing_screenshot; nothing is invented).
    screenshot: str = Field(pattern=r"^([0-9a-f]{64})?$", description="sha256 of the encoded image")
    image_format: Literal["png", "jpeg", "webp"] = "png"
    width: int = Field(gt=0, le=INT32_MAX)
    height: int = Field(gt=0, le=INT32_MAX)
    url: str = ""  # URL on web, activity on Android, bundle id on iOS
    a11y_tree: str = ""
    elements: list[Element] = Field(default_factory=list)
    action: Action
    target: Element | None = None
    screen_changed: bool | None = None
    error: str | None = None  # the action's error, if it failed
    guard: str | None = None  # the safety guard's decision when it blocked the action
    thought: str | None = None
    started_at: float = 0.0  # unix seconds
    observe_ms: float = 0.0
    act_ms: float = 0.0
    # The environment's `probes` read on this screen, as JSON ({name: value}): state the
    # tree does not show (a saved file, the app's API), recorded on exploration walks so
    # task synthesis can make goals of it (crawlers/task_candidates.py). None: not read.
    probes_json: str | None = None

    @property
    def probes(self) -> dict[str, Any] | None:
        return json.loads(self.probes_json) if self.probes_json else None


class Trajectory(BaseModel):
    """A task attempted on one device: provenance, outcome and who verified it."""

    model_config = ConfigDict(extra="forbid")

    trajectory_id: str
    task: Task
    platform: Platform
    app: str
    device: DeviceProfile
    source: Source = "crawl"
    source_name: str = "sandbox"
    policy: Policy
    seed: int = Field(default=0, ge=-INT64_MAX - 1, le=INT64_MAX)
    outcome: Outcome = "unknown"
    verified_by: VerifiedBy = "none"
    num_steps: int = Field(ge=0, le=INT32_MAX)
    distractions: list[str] = Field(default_factory=list)
    error: str | None = None
    pipeline_version: str = PIPELINE_VERSION
    created_at: float = 0.0
    # The verifier's reward (0-1 unless the environment says otherwise), its kind
    # (js, http, python, judge, state) and the reason it gave; null where none ran.
    reward: float | None = Field(default=None, allow_inf_nan=False)
    verifier: str | None = None
    verifier_reason: str | None = None

    @property
    def success(self) -> bool:
        return self.outcome == "success"


def session_seed(params: dict[str, Any], default: int) -> int:
    """The seed a sandbox session is opened with: the task's own when it has one,
    else the crawl's. Crawls, restores and audits of planted data must agree on it."""
    return int(params.get("seed", default))


def episode_seed(*parts: Any) -> int:
    """A 63-bit seed from any parts (crawl seed, task id...), stable across runs.

    Python's hash() is salted per process, so it cannot be used here.
    """
    raw = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big") >> 1


def step_seed(seed: int, step: int) -> int:
    """The sampling seed of step `step` of an episode seeded `seed` (every agent and rollout
    loop): 31 bits, so that torch.manual_seed and OpenAI-compatible servers both take it."""
    return (int(seed) * 1009 + step) % 2**31


def trajectory_id_for(*parts: Any) -> str:
    """A stable id from what defines a trajectory (source, task, seed, policy...).

    Stable ids make re-runs idempotent: a resumed crawl recognises what it has.
    """
    raw = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]
