"""`GuiEnv`: a gymnasium.Env over any environment file, on the crawl's own episode code.

An episode is crawlers.episode.EnvEpisode, the same object a crawl plays:
`reset` opens it (the environment runtime's start page, setup, wait_for and
instruction_js; retried on a lost browser or a start page that did not load,
as a crawl retries: trajforge/envs/launch.py), each `step` is one
`EnvEpisode.take` (the safety guard judges, the env executes, the step is
recorded, the verifier is asked), and the end is `EnvEpisode.finish` (the
outcome, the reward, the reason), so a rollout through this API is verified
exactly as a crawl is. Recording and the shaped reward terms are wrappers
(trajforge/envs/wrappers.py: RecordEpisodes, ShapedReward) that
`trajforge.envs.make` composes around it.

Observation: trajforge/envs/observations.py (the screenshot, the a11y tree, the
instruction, the url). info: the task, the device, timings, and `elements`.

Action: a unified action dict in screenshot pixels (trajforge.envs.spaces),
or a model's text answer read in `profile`'s frame (trajforge.envs.answers).
An answer that does not parse is a format failure: nothing is executed, the
step costs its place in the budget, and info["format_error"] says why; it
never raises.

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
`close()` frees the browser (and the Playwright driver) it launched; a source
handed in stays open, each episode's browser context is closed.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from crawlers.agent import target_of
from crawlers.env_crawl import device_for, environment_tasks
from crawlers.env_runtime import EnvironmentRuntime
from crawlers.env_source import close_episode_quietly, open_env_source
from crawlers.episode import EnvEpisode, EpisodeContext, StepResult
from crawlers.guard import SafetyGuard
from crawlers.pool_slots import EnvSource
from crawlers.web_env import BrowserCrashed
from schemas.actions import Action
from schemas.environment import Environment, load_environment
from schemas.errors import SchemaError
from schemas.model_profiles import ModelProfile, model_profile
from schemas.observation import Observation
from schemas.records import DeviceProfile, Task, Trajectory, trajectory_id_for

from .answers import action_from_dict, parse_answer
from .blobs import DigestBlobs
from .launch import Launch, open_episode, require_launchable
from .observations import (
    copied,
    element_info,
    elements_info,
    observation_of,
    observation_space,
    pixels,
    verdict_info,
)
from .recording import EpisodeRecorder
from .spaces import GuiActions

# How an episode whose env failed under it (a crashed browser, a lost actor) ends: its
# error starts so (an RL loop that replays such a rollout leaves this attempt unrecorded).
ENV_FAILED = "the environment failed"


class GuiEnv(gym.Env):
    """A GUI task of an environment file as a gymnasium.Env (see the module docstring).

    env_file: a YAML environment file (path), an `Environment`, or an
    `EnvironmentRuntime` (an environment with its own way to start and verify
    episodes: the sandbox's, see trajforge.envs.make_sandbox; or one given a VLM
    judge for `judge` verifiers). tasks: replace the file's tasks. The task is
    chosen at reset (options={"task_id": ...}); without one, a task drawn with the
    env's seeded generator, or, where the file has no tasks, an exploration
    episode (the instruction and the verdict then come from the file:
    `instruction_js`, `explore.verifier`). profile: the model profile text answers
    are read in (schemas.model_profiles; default qwen2.5-vl). device: a profile
    name (crawlers.randomise) or a DeviceProfile; default the file's viewport or
    its first device: the screenshot's frame is fixed for the spaces (the theme is
    still drawn by the seed). screen_size: (width, height) of the observation's
    screenshot when it should differ from the device's CSS viewport (an Appium
    phone's device-pixel screenshots are resized to it). max_steps: calls to
    step() per episode (default the file's; an exploration episode's
    explore.max_steps). source: where episodes play (trajforge/envs/launch.py):
    `Launch` settings for an env of its own (the default), or a source of leases
    (a pool: WebEnvPool, DevicePool, RayEnvPool; `OneEnv(env)` for one live
    env). guard: the SafetyGuard that judges actions. retries: how often a reset
    is retried. decode_screenshots: False (the
    server's sessions) leaves an observation's screenshot None when the captured
    PNG is it (`observation.screenshot` holds the PNG).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        env_file: str | Path | Environment | EnvironmentRuntime,
        *,
        tasks: list[Task] | None = None,
        profile: str | ModelProfile | None = None,
        device: str | DeviceProfile | None = None,
        screen_size: tuple[int, int] | None = None,
        max_steps: int | None = None,
        source: Launch | EnvSource | None = None,
        guard: SafetyGuard | None = None,
        render_mode: str | None = None,
        retries: int = 1,
        decode_screenshots: bool = True,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r}: expected one of {self.metadata['render_modes']}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be >= 1")
        if isinstance(env_file, EnvironmentRuntime):
            self.runtime = env_file
        else:
            given = env_file if isinstance(env_file, Environment) else load_environment(env_file)
            self.runtime = EnvironmentRuntime(given)
        self.environment = environment = self.runtime.environment
        self._launch = source if isinstance(source, Launch) else Launch()
        self._source: EnvSource | None = None if source is None or isinstance(source, Launch) else source
        if self._source is None:
            require_launchable(environment)  # an Appium platform needs a source: fail here
        self.tasks = list(tasks) if tasks is not None else environment.as_tasks()
        self.profile = model_profile(profile)
        self.max_steps, self.guard, self.retries = max_steps, guard or SafetyGuard(), retries
        self.render_mode, self.decode_screenshots = render_mode, decode_screenshots
        self._pinned, self._fixed_device = _pin_device(environment, device)
        width, height = screen_size or _screen_of(self._pinned, self._fixed_device)
        self.screen_size = (int(width), int(height))
        self.observation_space = observation_space(*self.screen_size)
        self.action_space = GuiActions(*self.screen_size)
        self._own = ExitStack()  # the env this one starts (Launch settings), closed with it
        self.recorder: EpisodeRecorder | None = None  # RecordEpisodes sets both (record_with)
        self.policy_id = "gym"
        self._run = uuid.uuid4().hex[:12]  # episode ids (and sandbox sessions) never repeat
        self._episodes = 0
        self._episode: EnvEpisode | None = None
        self._lease: ExitStack | None = None
        self._lost: BaseException | None = None  # the env died during the episode
        self._last: dict | None = None  # the last observation returned
        self._state: dict = {}
        self._closed = False
        self.last_trajectory: Trajectory | None = None

    def record_with(self, recorder: EpisodeRecorder, policy_id: str) -> None:
        """Record every episode from the next reset on into `recorder` (its blobs hold the
        screenshots, its audit log the guard's decisions) as played by `policy_id` (in the
        trajectory's id and its source_name "<environment source>:agent:<policy_id>"):
        what RecordEpisodes does."""
        self.recorder, self.policy_id = recorder, policy_id

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
        self._end_by_caller("reset() before the episode ended")
        options = dict(options or {})
        unknown = set(options) - {"task_id", "explore", "trajectory_id"}
        if unknown:
            raise ValueError(f"reset options {sorted(unknown)}: expected task_id, explore or trajectory_id")
        ep_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31))
        task = self._pick_task(options.get("task_id"), bool(options.get("explore")))
        exploring = bool(task.params.get("explore"))
        explore = self.environment.explore
        budget = self.max_steps or (
            explore.max_steps if exploring and explore else self.environment.max_steps
        )
        self._episodes += 1
        source, policy = self.environment.source, self.policy_id
        tid = options.get("trajectory_id") or trajectory_id_for(
            source, task.task_id, "rollout", policy, ep_seed, self._run, self._episodes
        )
        # A made-up exploration task's id names this env's run: the seed alone draws its screen.
        drawn_as = (
            task.model_copy(update={"task_id": f"{self.environment.name}-explore"}) if exploring else task
        )
        device = self._fixed_device or device_for(self._pinned, drawn_as, ep_seed)
        recorder = self.recorder
        ctx = EpisodeContext(
            trajectory_id=tid,
            seed=ep_seed,
            device=device,
            blobs=recorder.blobs if recorder is not None else DigestBlobs(),
            guard=self.guard,
            max_steps=budget,
            audit=recorder.audit if recorder is not None else None,
        )
        if self._source is None:
            launch = dataclasses.asdict(self._launch)
            self._source = self._own.enter_context(open_env_source(self.environment, **launch))
        episode, obs, self._lease, attempts = open_episode(
            self._source, self.runtime, task, ctx, self.retries
        )
        self._episode = episode
        self._state = {"calls": 0, "budget": budget}
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
            "elements": elements_info(obs.elements, self.screen_size),
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
        parsed, thought, format_error = self._parse(action)
        parse_ms = (time.perf_counter() - t0) * 1000
        result: StepResult | None = None
        if parsed is not None:
            try:
                result = episode.take(parsed, target=target_of(parsed, before.elements), thought=thought)
            except BrowserCrashed as e:
                self._lost = e  # the lease is given back with it: the env is restarted or dropped
                self.end_with_env_failure(f"{ENV_FAILED}: {e}")
                raise
        terminated = episode.ended
        truncated = not terminated and state["calls"] >= state["budget"]
        obs = result.obs if result is not None else before
        info: dict[str, Any] = {
            "step": state["calls"] - 1,
            "action": parsed.model_dump(mode="json", exclude_none=True) if parsed is not None else None,
            "thought": thought,
            "format_error": format_error,
            "target": element_info(result.step.target, self.screen_size)
            if result and result.step.target
            else None,
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
        info["verdict"] = verdict_info(episode)
        t_obs = time.perf_counter()
        observation = self._observation(obs, same_screen=result is None)
        info["elements"] = elements_info(obs.elements, self.screen_size)
        info["timings"] = {
            "step_ms": round((time.perf_counter() - t0) * 1000, 1),
            "parse_ms": round(parse_ms, 2),
            "act_ms": result.step.act_ms if result and result.executed else None,
            "decode_ms": round((time.perf_counter() - t_obs) * 1000, 1),
        }
        return observation, task_reward, bool(terminated), bool(truncated), info

    def _parse(self, action: dict | str | Action) -> tuple[Action | None, str | None, str | None]:
        """(the action, the thought, None) or, for one that does not parse, (None, None, why)."""
        width, height = self.screen_size
        try:
            if isinstance(action, str):
                return (*parse_answer(action, self.profile, width, height), None)
            return action_from_dict(action, width, height), None, None
        except SchemaError as e:
            return None, None, str(e)

    def render(self) -> np.ndarray | None:
        """The last screenshot (render_mode "rgb_array"), None before the first reset."""
        if self.render_mode != "rgb_array" or self._last is None:
            return None
        shot = self._last["screenshot"]
        return shot.copy() if shot is not None else pixels(self.observation, self.screen_size)

    def close(self) -> None:
        """End the episode in play (recorded when it has steps), close its browser context,
        close the browser this env launched (RecordEpisodes then commits what its store holds)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._end_by_caller("close() before the episode ended")
        finally:
            self._release()
            self._own.close()

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
    def task_named(self, task_id: str) -> Task:
        """The env's task `task_id` (ValueError naming the known ones when there is none)."""
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        known = [t.task_id for t in self.tasks]
        raise ValueError(
            f"environment '{self.environment.name}': no task {task_id!r}; known: {known[:20]}"
            + (" …" if len(known) > 20 else "")
        )

    def _pick_task(self, task_id: str | None, explore: bool) -> Task:
        if task_id is not None and not explore:
            return self.task_named(task_id)
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

    def _finish(self) -> Trajectory:
        """The episode's trajectory (recorded when a recorder is set)."""
        traj, steps = self._episode.finish(
            "agent",
            source="rollout",
            source_name=f"{self.environment.source}:agent:{self.policy_id}",
        )
        recorded = self.recorder.add(traj, steps) if self.recorder is not None else False
        self._state.update(done=True, recorded=recorded)
        self.last_trajectory = traj
        return traj

    def _ending(self, traj: Trajectory) -> dict:
        return {
            "outcome": traj.outcome,
            "verified_by": traj.verified_by,
            "reason": traj.verifier_reason,
            "episode_error": traj.error,
            "trajectory_id": traj.trajectory_id,
            "recorded": self._state.get("recorded", False),
        }

    def end_with_env_failure(self, reason: str) -> None:
        """End the episode in play because the environment failed under it (or the session
        serving it was lost): recorded as `error` even without steps, never scored as a
        failure of the policy."""
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

    def end_episode(self, why: str) -> None:
        """End the episode in play as a reset would (recorded as a failure that says why
        when it took steps) and give its lease back; the env stays open for the next reset
        (the server's warm pool, when a prepared episode replaces this one)."""
        self._end_by_caller(why)

    def _end_by_caller(self, why: str) -> None:
        """End the episode in play because the caller moved on (reset, close): recorded as a
        failure that says why, when it took steps."""
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

    def _observation(self, obs: Observation, same_screen: bool = False) -> dict:
        if same_screen and self._last is not None:  # nothing ran: the same screen, as new objects
            out = copied(self._last)
        else:
            out = observation_of(
                obs, self._episode.task.instruction, self.screen_size, self.decode_screenshots
            )
        self._last = copied(out)
        return out

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
