"""A VLM backend as a policy of the Gym API: it reads the observation and answers in text.

`TextAgent` plays any gymnasium env of trajforge.envs (a GuiEnv over an environment
file or the sandbox, a RemoteEnv): each step it asks the backend one chat request
built by the one prompt builder (training.gui_prompt.GuiPrompt: the crawl agent's
prompt, or for a backend trained on a reasoning set, `prompt = "reasoning_set"`
e.g. training.policy_backend.PolicyBackend, that set's own) and hands the env the
answer's text. The env parses it in its model profile (trajforge.envs.answers) and
counts what does not parse as a format failure.

Sampling is seeded per step as the crawl's agent seeds it (schemas.records.step_seed),
and every request's metadata carries `episode` (the rollout's trajectory id), so a
recording backend hands back one rollout's generations
(PolicyBackend.take_generations(episode=...)).
"""

from __future__ import annotations

from schemas.records import step_seed
from training.gui_prompt import GuiPrompt, PromptSettings
from trajforge.vlm.backends import VLMBackend, VLMRequest


class TextAgent:
    """Asks `backend` for each answer of one episode (see the module docstring).

    Call it with each step's observation and info (the reset's first: training.episode's
    answer_fn), or `begin(obs, info)` after `env.reset`, `answer(obs, info)` for each
    step's text and `observe(info)` with each step's info. `settings`: the prompt (its
    prompt and mode default to the backend's `prompt` / `set_mode` attributes, else the
    agent prompt in "direct" mode).
    """

    def __init__(
        self,
        backend: VLMBackend,
        settings: PromptSettings | None = None,
        *,
        sampling: tuple[int, float, int | None] = (256, 0.0, None),
        episode: str | None = None,
    ):
        if settings is None:
            settings = PromptSettings(
                prompt=getattr(backend, "prompt", None) or "agent",
                mode=getattr(backend, "set_mode", None) or "direct",
            )
        self.backend = backend
        self.settings = settings
        self.max_new_tokens, self.temperature, self.seed = sampling
        self.episode = episode
        self.steps = 0
        self.answers: list[str] = []
        self.prompt: GuiPrompt | None = None

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def __call__(self, obs: dict, info: dict) -> str:
        """This step's answer: the reset's info begins the episode, a step's joins the history."""
        if self.prompt is None:
            self.begin(obs, info)
        else:
            self.observe(info)
        return self.answer(obs, info)

    def begin(self, obs: dict, info: dict) -> None:
        """A new episode: its task and frame from the reset's info."""
        self.prompt = GuiPrompt.from_reset(obs, info, self.settings)
        self.task_id = str((info.get("task") or {}).get("task_id", ""))
        self.steps, self.answers = 0, []

    def request(self, obs: dict, info: dict) -> VLMRequest:
        """The chat request of this step."""
        prompt = self._begun()
        fw, fh = prompt.frame
        return VLMRequest(
            messages=prompt.messages(obs, info, self.steps),
            key=f"{self.task_id}#{self.steps}",
            metadata={
                "task_id": self.task_id,
                "step": self.steps,
                "width": fw,
                "height": fh,
                "prompt": self.settings.prompt,
                "coords": prompt.coords,
                **({"episode": self.episode} if self.episode else {}),
            },
        )

    def answer(self, obs: dict, info: dict) -> str:
        """The model's answer to this step (an exception of the model's is raised as is)."""
        req = self.request(obs, info)
        seed = None if self.seed is None else step_seed(self.seed, self.steps)
        self.steps += 1
        raw = self.backend.generate([req], self.max_new_tokens, temperature=self.temperature, seed=seed)[0]
        if not isinstance(raw, str):  # a backend that ignored n=1
            raw = raw[0]
        self.answers.append(raw)
        return raw

    def observe(self, info: dict) -> None:
        """The step's outcome: an action that ran joins the history."""
        self._begun().record(info)

    def _begun(self) -> GuiPrompt:
        if self.prompt is None:
            raise RuntimeError("TextAgent: begin(obs, info) with the reset's observation first")
        return self.prompt
