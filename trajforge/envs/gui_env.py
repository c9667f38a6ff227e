"""`GuiEnv`: a gymnasium.Env over any environment file, on the crawl's own episode code.

An episode is crawlers.env_episode.EnvEpisode, the same object a crawl plays:
`reset` opens it (the environment runtime's start page, setup, wait_for and
instruction_js; retried on a lost browser or a start page that did not load,
as a crawl retries), each `step` is one `EnvEpisode.take` (the safety guard
judges, the env executes, the step is recorded, the verifier is asked), and
the end is `EnvEpisode.finish` (the outcome, the reward, the reason), so a
rollout through this API is verified and recorded exactly as a crawl is.

Observation (a dict): `screenshot` (uint8 H x W x 3, the screen in the
env's fixed frame), `a11y` (the accessibility tree as text), `instruction`
(the task's, or the one the app made up through `instruction_js`) and `url`.
info: the task, the device, timings, and `elements` (index, role, name, bbox
x0, y0, x1, y1 in screenshot pixels, visibility) for prompting with marks.

Action: a unified action dict in screenshot pixels (trajforge.envs.spaces),
or a model's text answer read in `profile`'s frame (trajforge.envs.answers).
An answer that does not parse is a format failure: nothing is executed, the
step costs its place in the budget, and info["reward_parts"]["format"] is the
penalty (trajforge.envs.rewards); it never raises.

Reward: the verifier's (0 until the episode ends). `terminated` when the
episode ends: the verifier said done, the policy gave a final action (done,
answer, take-over; the verifier is then asked once more), the guard refused
an action (a failure, as in a crawl), or the verifier failed (an error).
`truncated` when `max_steps` calls ran out (the verifier is asked once more
for the record).

Nondeterminism: a GUI is not pixel-deterministic. Two resets with one seed
open the same task on the same device and theme, but clocks, animations,
caret blinks, network timing and server state make screenshots and trees
differ; the registered spec says `nondeterministic=True`, so
gymnasium's checker skips its equality checks (it still checks spaces, types,
seeding of `np_random`, fresh data on every call, close twice).

Threads: Playwright's sync API is bound to the thread that launched the
browser, which happens at the first `reset`: use the env on that thread.
`close()` frees the browser (and the Playwright driver) it launched; an env or
pool handed in stays open, each episode's browser context is closed.
"""

from __future__ import annotations

import io
import logging
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from PIL import Image

from crawlers.agent import target_of
from crawlers.allowlist import Allowlist
from crawlers.crawl_driver import RetryPolicy
from crawlers.device_pool import PoolError
from crawlers.env_crawl import device_for, environment_tasks
from crawlers.env_runtime import EnvironmentRuntime, SetupError, StartPageError
from crawlers.env_source import OneEnv, close_episode_quietly
from crawlers.episode import EnvEpisode, EpisodeContext, StepResult
from crawlers.guard import SafetyGuard
from crawlers.web_env import BrowserCrashed, WebEnv
from schemas.actions import Action
from schemas.environment import Environment, load_environment
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, model_profile
from schemas.observation import Observation
from schemas.records import DeviceProfile, Element, Task, Trajectory, trajectory_id_for
from trajforge.store.raw import RawStore

from .answers import action_from_dict, parse_answer, reflection_of
from .blobs import DigestBlobs
from .recording import EpisodeRecorder
from .rewards import RewardWeights, episode_parts, step_parts
from .spaces import AnyText, GuiActions, screenshot_space
from .wire import png_size

log = logging.getLogger(__name__)

A11Y_MAX_CHARS = 200_000
# How an episode whose env failed under it (a crashed browser, a lost actor) ends: its
# error starts so (an RL loop that replays such a rollout leaves this attempt unrecorded).
ENV_FAILED = "the environment failed"
TEXT_MAX_CHARS = 8_192
_CLIPPED = " …(clipped)"


class ByReference:
    """A make() argument a re-make from the spec shares rather than copies (a live env,
    a pool, a runtime): gymnasium deep-copies a spec's kwargs."""

    def __init__(self, value: Any):
        self.value = value

    def __deepcopy__(self, memo) -> ByReference:
        return self


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, ByReference) else value


class GuiEnv(gym.Env):
    """A GUI task of an environment file as a gymnasium.Env (see the module docstring).

    env_file: a YAML environment file (path) or an `Environment` (the sandbox's:
    sandbox.environment.sandbox_environment; or see trajforge.envs.make_sandbox).
    task_id: the task every reset plays (reset's options={"task_id": ...} wins);
    None: a task drawn with the env's seeded generator, or, where the file has
    no tasks, an exploration episode (the instruction and the verdict then come
    from the file: `instruction_js`, `explore.verifier`). tasks / tasks_file:
    replace the file's tasks. profile: the model profile text answers are read
    in (schemas.model_profiles; default qwen2.5-vl). record_to: a data root;
    every episode is written to its raw store (<record_to>/raw, collection
    `collection`, default "gym/<environment>") as source "rollout", policy
    "agent", source_name "<environment source>:agent:<policy_id>"; or a RawStore
    (that store), or an EpisodeRecorder shared with other envs (trajforge/envs/
    recording.py: one writer per collection for envs on many threads, a
    collection chosen per episode; it stays open when this env closes).
    max_steps: calls to step() per episode (default the file's; an
    exploration episode's explore.max_steps). device: a profile name
    (crawlers.randomise) or a DeviceProfile; default the file's viewport or its
    first device: the screenshot's frame is fixed for the spaces (the theme is
    still drawn by the seed). screen_size: (width, height) of the observation's
    screenshot when it should differ from the device's CSS viewport (an Appium
    phone's device-pixel screenshots are resized to it). alpha, beta, gamma,
    reflection: the shaped terms (trajforge.envs.rewards). env / pool: play on
    this env (a WebEnv, a MobileEnv on an Appium phone) or on leases of this
    EnvSource (WebEnvPool, DevicePool, RayEnvPool); default a headless Chromium allowed
    only the environment's origins, or, for a `platform: desktop` file, a DesktopEnv of
    its own (its own Xvfb, accessibility bus and app; crawlers/desktop_env.py). runtime: an EnvironmentRuntime to use instead of
    the file's (the sandbox's). judge: the VLM judge of `judge` verifiers.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        env_file: str | Path | Environment,
        *,
        task_id: str | None = None,
        profile: str | ModelProfile | None = None,
        record_to: str | Path | RawStore | EpisodeRecorder | None = None,
        tasks: list[Task] | None = None,
        tasks_file: str | Path | None = None,
        max_steps: int | None = None,
        device: str | DeviceProfile | None = None,
        screen_size: tuple[int, int] | None = None,
        policy_id: str = "gym",
        collection: str | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        gamma: float | None = None,
        reflection: bool = True,
        env: Any = None,
        pool: Any = None,
        runtime: EnvironmentRuntime | None = None,
        judge: Any = None,
        guard: SafetyGuard | None = None,
        image_format: str = "png",
        step_timeout_s: float = 10.0,
        headless: bool = True,
        retries: int = 1,
        render_mode: str | None = None,
    ):
        env, pool, runtime, judge, guard, record_to = map(
            _unwrap, (env, pool, runtime, judge, guard, record_to)
        )
        if env is not None and pool is not None:
            raise ValueError("GuiEnv: give env= or pool=, not both")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r}: expected one of {self.metadata['render_modes']}")
        if isinstance(env_file, Environment):
            environment = env_file
        else:
            environment = load_environment(env_file, tasks_file=tasks_file)
        if environment.platform not in ("web", "mobile_web", "desktop") and env is None and pool is None:
            raise ValueError(
                f"environment '{environment.name}': platform {environment.platform} runs on an "
                f"Appium device; pass env= (a MobileEnv) or pool= (a DevicePool)"
            )
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be >= 1")
        self.environment = environment
        self.runtime = runtime or EnvironmentRuntime(environment, judge=judge)
        self.tasks = list(tasks) if tasks is not None else environment.as_tasks()
        self.task_id = task_id
        if task_id is not None:
            self._task(task_id)  # an unknown id fails here, not at the first reset
        self.profile = model_profile(profile)
        self.max_steps = max_steps
        self.policy_id = policy_id
        given = {"alpha": alpha, "beta": beta, "gamma": gamma}
        self.weights = RewardWeights(**{k: float(v) for k, v in given.items() if v is not None})
        self.reflection = reflection
        self.guard = guard or SafetyGuard()
        self.retries = retries
        self.image_format, self.step_timeout_s, self.headless = image_format, step_timeout_s, headless
        self.render_mode = render_mode
        self._pinned, self._fixed_device = _pin_device(environment, device)
        width, height = screen_size or _screen_of(self._pinned, self._fixed_device)
        self.screen_size = (int(width), int(height))
        self.observation_space = spaces.Dict(
            {
                "screenshot": screenshot_space(*self.screen_size),
                "a11y": AnyText(A11Y_MAX_CHARS),
                "instruction": AnyText(TEXT_MAX_CHARS),
                "url": AnyText(TEXT_MAX_CHARS),
            }
        )
        self.action_space = GuiActions(*self.screen_size)
        # Where episodes play: the caller's env, the caller's pool, or our own browser.
        self._own_env: WebEnv | None = None
        self._source = pool if pool is not None else (OneEnv(env) if env is not None else None)
        # The raw store episodes are recorded into.
        self.collection = collection or f"gym/{environment.name}"
        self._own_recorder = not isinstance(record_to, EpisodeRecorder)
        if isinstance(record_to, EpisodeRecorder):
            self.recorder: EpisodeRecorder | None = record_to
        elif isinstance(record_to, RawStore):
            self.recorder = EpisodeRecorder(record_to, self.collection)
        elif record_to is not None:
            self.recorder = EpisodeRecorder(RawStore(Path(record_to) / "raw"), self.collection)
        else:
            self.recorder = None
        self.store = self.recorder.store if self.recorder is not None else None
        self._audit = self.recorder.audit if self.recorder is not None else None
        self._blobs = self.recorder.blobs if self.recorder is not None else DigestBlobs()
        self._run = uuid.uuid4().hex[:12]  # episode ids (and sandbox sessions) never repeat
        self._episodes = 0
        self._episode: EnvEpisode | None = None
        self._lease: ExitStack | None = None
        self._lost: BaseException | None = None  # the env died during the episode
        self._last: dict | None = None  # the last observation returned
        # False (the server's sessions): an observation's screenshot is None when the
        # captured PNG is it; `observation.screenshot` holds the PNG.
        self.decode_screenshots = True
        self._state: dict = {}
        self._closed = False
        self.last_trajectory: Trajectory | None = None

    # ------------------------------------------------------------------ the Gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Open a new episode. options: {"task_id": ...}, or {"explore": True} for an
        exploration episode of the file; {"trajectory_id": ...} names the episode (an RL
        loop's stable id, so that a re-run knows what its store holds; default a fresh
        one). A seed fixes the task drawn, the device's theme and the episode's seed;
        the screen itself is not deterministic."""
        super().reset(seed=seed)
        if self._closed:
            raise RuntimeError("this GuiEnv is closed")
        t0 = time.perf_counter()
        self._abandon("reset() before the episode ended")
        options = dict(options or {})
        unknown = set(options) - {"task_id", "explore", "trajectory_id"}
        if unknown:
            raise ValueError(f"reset options {sorted(unknown)}: expected task_id, explore or trajectory_id")
        ep_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31))
        task = self._pick_task(options.get("task_id"), bool(options.get("explore")))
        exploring = bool(task.params.get("explore"))
        budget = self.max_steps or (
            self.environment.explore.max_steps
            if exploring and self.environment.explore
            else self.environment.max_steps
        )
        self._episodes += 1
        tid = options.get("trajectory_id") or trajectory_id_for(
            self.environment.source,
            task.task_id,
            "rollout",
            self.policy_id,
            ep_seed,
            self._run,
            self._episodes,
        )
        device = self._fixed_device or device_for(self._pinned, task, ep_seed)
        ctx = EpisodeContext(
            trajectory_id=tid,
            seed=ep_seed,
            device=device,
            blobs=self._blobs,
            guard=self.guard,
            max_steps=budget,
            audit=self._audit,
        )
        episode, obs, attempts = self._open(task, ctx)
        self._episode = episode
        self._state = {"calls": 0, "budget": budget, "format_failures": 0, "reflections": 0, "blocked": 0}
        t_obs = time.perf_counter()
        observation = self._observation(obs)
        decode_ms = (time.perf_counter() - t_obs) * 1000
        spec = self.runtime.verifier_for(episode.task)
        info = {
            "task": episode.task.model_dump(mode="json"),
            "device": (episode.device or device).model_dump(mode="json"),
            "platform": getattr(episode.env, "platform", None) or "web",
            "environment": self.environment.name,
            "trajectory_id": tid,
            "seed": ep_seed,
            "max_steps": budget,
            "verifier": spec.kind if spec is not None else None,
            "profile": self._profile_info(),
            "elements": self._elements(obs.elements),
            "error": obs.last_action_error,
            "attempts": attempts,
            "timings": {
                "reset_ms": round((time.perf_counter() - t0) * 1000, 1),
                "open_ms": round(episode.open_ms or 0.0, 1),
                "decode_ms": round(decode_ms, 1),
            },
        }
        return observation, info

    def step(self, action: dict | str | Action) -> tuple[dict, float, bool, bool, dict]:
        """One action (a dict in screenshot pixels, an Action, or a model's text answer)."""
        episode = self._episode
        if episode is None or self._closed:
            raise RuntimeError("call reset() before step()")
        if episode.ended or self._state.get("done"):
            raise RuntimeError("the episode has ended (terminated or truncated): call reset()")
        t0 = time.perf_counter()
        state = self._state
        state["calls"] += 1
        before = episode.obs
        width, height = self.screen_size
        parsed: Action | None = None
        thought = format_error = None
        try:
            if isinstance(action, str):
                parsed, thought = parse_answer(action, self.profile, width, height)
            else:
                parsed = action_from_dict(action, width, height)
        except SchemaError as e:
            format_error = str(e)
            state["format_failures"] += 1
        parse_ms = (time.perf_counter() - t0) * 1000
        result: StepResult | None = None
        reflected = False
        if parsed is not None:
            previous = episode.steps[-1] if episode.steps else None
            try:
                result = episode.take(parsed, target=target_of(parsed, before.elements), thought=thought)
            except BrowserCrashed as e:
                self._lost = e  # the lease is given back with it: the env is restarted or dropped
                self.abandon(f"{ENV_FAILED}: {e}")
                raise
            said = action if isinstance(action, str) else thought
            reflected = self.reflection and _corrects(previous, result, reflection_of(said))
            state["reflections"] += reflected
            state["blocked"] += result.step.guard is not None
        terminated = episode.ended
        truncated = not terminated and state["calls"] >= state["budget"]
        obs = result.obs if result is not None else before
        info: dict[str, Any] = {
            "step": state["calls"] - 1,
            "action": parsed.model_dump(mode="json", exclude_none=True) if parsed is not None else None,
            "thought": thought,
            "format_error": format_error,
            "target": self._element(result.step.target) if result and result.step.target else None,
            "executed": bool(result and result.executed),
            "error": result.step.error if result else None,
            "guard": result.step.guard if result else None,
            "screen_changed": result.step.screen_changed if result else None,
        }
        task_reward = 0.0
        if terminated or truncated:
            traj = self._finish()
            task_reward = float(traj.reward) if traj.reward is not None else 0.0
            info.update(self._ending(traj))
        info["verdict"] = _verdict(episode)
        info["reward_parts"] = step_parts(
            task_reward,
            format_ok=format_error is None,
            reflection=reflected,
            invalid=bool(result and result.step.guard),
            w=self.weights,
        )
        t_obs = time.perf_counter()
        observation = self._observation(obs, copy_of=None if result is not None else self._last)
        info["elements"] = self._elements(obs.elements)
        info["timings"] = {
            "step_ms": round((time.perf_counter() - t0) * 1000, 1),
            "parse_ms": round(parse_ms, 2),
            "act_ms": result.step.act_ms if result and result.executed else None,
            "decode_ms": round((time.perf_counter() - t_obs) * 1000, 1),
        }
        return observation, task_reward, bool(terminated), bool(truncated), info

    def render(self) -> np.ndarray | None:
        """The last screenshot (render_mode "rgb_array"), None before the first reset."""
        if self.render_mode != "rgb_array" or self._last is None:
            return None
        shot = self._last["screenshot"]
        return shot.copy() if shot is not None else self._pixels(self.observation)

    def close(self) -> None:
        """End the episode in play (recorded when it has steps), close its browser context,
        close the browser this env launched; the store's writer commits what it holds."""
        if self._closed:
            return
        self._closed = True
        try:
            self._abandon("close() before the episode ended")
        finally:
            self._release()
            if self._own_env is not None:
                self._own_env.close()
                self._own_env = None
            if self.recorder is not None and self._own_recorder:
                self.recorder.close()

    # ------------------------------------------------------------------ what a policy may read
    @property
    def observation(self) -> Observation | None:
        """The crawler's observation of the current screen (normalised boxes, raw screenshot)."""
        return self._episode.obs if self._episode is not None else None

    @property
    def task(self) -> Task | None:
        """The task of the episode in play, as the page states it."""
        return self._episode.task if self._episode is not None else None

    @property
    def browser(self) -> Any:
        """The env the current episode plays on (a WebEnv, a MobileEnv), None before reset."""
        return self._episode.env if self._episode is not None else None

    # ------------------------------------------------------------------ episodes
    def _pick_task(self, task_id: str | None, explore: bool) -> Task:
        task_id = task_id or self.task_id
        if task_id is not None and not explore:
            return self._task(task_id)
        if self.tasks and not explore:
            return self.tasks[int(self.np_random.integers(0, len(self.tasks)))]
        made = environment_tasks(self.environment, episodes=1, explore=True)
        if not made:
            raise ValueError(
                f"environment '{self.environment.name}' has no tasks and nothing to explore "
                f"with (no 'explore' and no 'instruction_js')"
            )
        task = made[0]
        return task.model_copy(
            update={
                "task_id": f"{self.environment.name}-explore-{self._run}-{self._episodes:05d}",
                "params": {**task.params, "episode": self._episodes},
            }
        )

    def _task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        known = [t.task_id for t in self.tasks]
        raise ValueError(
            f"environment '{self.environment.name}': no task {task_id!r}; known: {known[:20]}"
            + (" …" if len(known) > 20 else "")
        )

    def _open(self, task: Task, ctx: EpisodeContext) -> tuple[EnvEpisode, Observation, int]:
        """The episode opened on a fresh lease, retried as a crawl retries an attempt;
        (episode, first observation, attempts it took)."""
        if self._source is None and self.environment.platform == "desktop":
            from crawlers.desktop_env import DesktopEnv  # python-xlib: the `desktop` extra

            self._own_env = DesktopEnv(
                self.environment, image_format=self.image_format, step_timeout_s=self.step_timeout_s
            )
            self._source = OneEnv(self._own_env)
        if self._source is None:
            self._own_env = WebEnv.launch(
                headless=self.headless,
                image_format=self.image_format,
                step_timeout_s=self.step_timeout_s,
                request_filter=Allowlist(self.environment.origins()),
            )
            self._source = OneEnv(self._own_env)

        def attempt(n: int) -> tuple[EnvEpisode, Observation, int]:
            stack = ExitStack()
            env = stack.enter_context(self._source.lease())
            try:
                episode = EnvEpisode(env, self.runtime, task, ctx)
                obs = episode.open()
            except BaseException as e:
                close_episode_quietly(env)
                stack.__exit__(type(e), e, e.__traceback__)
                raise
            self._lease = stack
            return episode, obs, n + 1

        retry = RetryPolicy(
            self.retries, fatal=(PoolError,), retry_on=(BrowserCrashed, StartPageError, SetupError)
        )
        opened, error = retry.run(
            attempt,
            what=f"{self.environment.name} task {task.task_id}",
            on_retry=lambda message: log.warning("reset: retrying after %s", message),
        )
        if error is not None:
            raise error
        return opened

    def _finish(self) -> Trajectory:
        """The episode's trajectory (recorded when a store is set)."""
        episode, state = self._episode, self._state
        traj, steps = episode.finish(
            "agent",
            source="rollout",
            source_name=f"{self.environment.source}:agent:{self.policy_id}",
        )
        recorded = False
        if self.recorder is not None:
            recorded = self.recorder.add(traj, steps)
        state.update(done=True, recorded=recorded)
        self.last_trajectory = traj
        return traj

    def _ending(self, traj: Trajectory) -> dict:
        state = self._state
        return {
            "outcome": traj.outcome,
            "verified_by": traj.verified_by,
            "reason": traj.verifier_reason,
            "episode_error": traj.error,
            "trajectory_id": traj.trajectory_id,
            "recorded": state.get("recorded", False),
            "episode_reward_parts": episode_parts(
                success=traj.outcome == "success",
                format_ok=state["format_failures"] == 0,
                reflection=state["reflections"] > 0,
                invalid=state["blocked"] > 0,
                w=self.weights,
            ),
        }

    def abandon(self, reason: str) -> None:
        """End the episode in play as `error` (the environment failed, or the session
        serving it was lost), recorded even without steps: never scored as a failure."""
        episode = self._episode
        if episode is None:
            return
        try:
            if episode.loop is not None and not self._state.get("done"):
                episode.fail(reason)
                self._finish()
        finally:
            self._release()
            self._episode = None

    def _abandon(self, why: str) -> None:
        """End the episode in play: recorded (as a failure that says why) when it took steps."""
        episode = self._episode
        if episode is None:
            return
        try:
            if not self._state.get("done") and episode.loop is not None and episode.steps:
                if not episode.ended:
                    episode.give_up(why)
                self._finish()
        finally:
            self._release()
            self._episode = None

    def _release(self) -> None:
        stack, self._lease = self._lease, None
        lost, self._lost = self._lost, None
        if stack is None:
            return
        try:
            if self._episode is not None:
                close_episode_quietly(self._episode.env)
        finally:
            if lost is not None:  # the source restarts (OneEnv) or drops (a pool) the lost env
                stack.__exit__(type(lost), lost, lost.__traceback__)
            else:
                stack.close()

    # ------------------------------------------------------------------ observations
    def _observation(self, obs: Observation, copy_of: dict | None = None) -> dict:
        if copy_of is not None:  # nothing ran: the same screen, as new objects
            out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in copy_of.items()}
        else:
            out = {
                "screenshot": self._pixels(obs) if self._decodes(obs) else None,
                "a11y": _clip(obs.a11y_tree or "", A11Y_MAX_CHARS),
                "instruction": _clip(self._episode.task.instruction, TEXT_MAX_CHARS),
                "url": _clip(obs.url or "", TEXT_MAX_CHARS),
            }
        self._last = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in out.items()}
        return out

    def _decodes(self, obs: Observation) -> bool:
        """False only where the captured PNG is the screenshot already and nobody here
        needs its pixels (a server sends the PNG as is: decoding it would be wasted)."""
        if self.decode_screenshots or obs.image_format != "png":
            return True
        return png_size(obs.screenshot) != self.screen_size

    def _pixels(self, obs: Observation) -> np.ndarray:
        image = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
        if image.size != self.screen_size:
            image = image.resize(self.screen_size, Image.Resampling.BILINEAR)
        return np.array(image, dtype=np.uint8)

    def _element(self, e: Element, index: int | None = None) -> dict:
        width, height = self.screen_size
        box = None
        if e.bbox is not None:
            x0, y0, x1, y1 = e.bbox
            box = [round(x0 * width, 1), round(y0 * height, 1), round(x1 * width, 1), round(y1 * height, 1)]
        out = {"role": e.role, "name": e.name, "bbox": box}
        out["visibility"] = e.visibility.model_dump() if e.visibility is not None else None
        if index is not None:
            out = {"index": index, **out}
        return out

    def _elements(self, elements: list[Element]) -> list[dict]:
        return [self._element(e, i) for i, e in enumerate(elements)]

    def _profile_info(self) -> dict:
        """The frame text answers are read in: the observation's screenshot resized to it is
        what the model sees."""
        fw, fh = self.profile.frame(*self.screen_size)
        return {"name": self.profile.name, "frame": [fw, fh], "coords": self.profile.coords}


def _pin_device(environment: Environment, device: str | DeviceProfile | None):
    """(environment whose device_for draws one screen size, a fixed DeviceProfile or None)."""
    if isinstance(device, DeviceProfile):
        return environment, device
    if device is not None:
        return environment.model_copy(update={"devices": [device], "viewport": None}), None
    if environment.viewport is None and len(environment.devices) > 1:
        return environment.model_copy(update={"devices": environment.devices[:1]}), None
    return environment, None


def _screen_of(environment: Environment, fixed: DeviceProfile | None) -> tuple[int, int]:
    """The screenshot's size: the device's viewport in CSS px (WebEnv's scale="css")."""
    probe = Task(task_id="probe", instruction="probe", language="en", app=environment.name)
    profile = fixed or device_for(environment, probe, 0)
    return profile.viewport_width, profile.viewport_height


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_CLIPPED)] + _CLIPPED


def _verdict(episode: EnvEpisode) -> dict | None:
    v = episode.verdict
    if episode.verifier_error is not None:
        return {"error": episode.verifier_error}
    if v is None:
        return None
    return {"done": v.done, "success": v.success, "reward": v.reward, "reason": v.reason, "kind": v.kind}


def _corrects(previous, result: StepResult, reflection: str | None) -> bool:
    """A reflection that corrected something: after a step that went wrong, this step's
    answer reflects and its action ran without error and changed the screen."""
    if reflection is None or previous is None or not result.executed:
        return False
    went_wrong = previous.error is not None or previous.screen_changed is False
    return went_wrong and result.step.error is None and bool(result.step.screen_changed)
