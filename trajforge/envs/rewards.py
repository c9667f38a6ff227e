"""The reward a GUI env returns, and the shaped terms it reports beside it.

The reward `step()` returns is the environment's verifier's: 0 until the
episode ends, then the trajectory's recorded reward (the verdict's `reward`,
0 where the verifier gave none or none exists). The shaped terms are those of
synthesis.rewards.composite_reward, the definition online RL trains with
(r_task + alpha*r_format + beta*r_reflection - gamma*r_invalid; alpha 0.1,
beta 0.3, gamma 2.0 by default, configurable), reported apart in
info["reward_parts"]; the trainer decides whether to add them.

Per step, each term is its weighted contribution:
- format: -alpha when the answer did not parse (or the dict was not a valid
  action), else 0: composite_reward's alpha*r_format less the alpha every
  parsed answer would earn, so a longer episode earns nothing for parsing;
- invalid: -gamma when the safety guard refused the action;
- reflection: +beta when the answer carries a non-empty `<reflection>` right
  after a step that went wrong (its action failed, or did not change the
  screen) and its own action ran without error and changed the screen: a
  reflection that corrected something. Off with `reflection=False` (a policy
  can earn it by making a mistake on purpose; weigh beta accordingly);
- shaped: task + the three.
When the episode ends, info["episode_reward_parts"] is composite_reward over
the whole episode as training/online.py computes a rollout's: r_task the
verifier's success, r_format 1 when every answer parsed, r_reflection 1 when
any step earned it, r_invalid 1 when the guard refused any action.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from synthesis.rewards import W_FORMAT, W_INVALID, W_REFLECTION, composite_reward


@dataclass(frozen=True)
class RewardWeights:
    """alpha (format), beta (reflection), gamma (invalid action), as composite_reward's."""

    alpha: float = W_FORMAT
    beta: float = W_REFLECTION
    gamma: float = W_INVALID

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not value >= 0:
                raise ValueError(f"reward weight {name}={value!r} must be >= 0")


def step_parts(task: float, *, format_ok: bool, reflection: bool, invalid: bool, w: RewardWeights) -> dict:
    """The step's weighted terms and their sum ("shaped"); "weights" names alpha, beta, gamma."""
    shaped_terms = (
        composite_reward(
            0.0,
            format_ok,
            reflection,
            invalid,
            w_task=0.0,
            w_format=w.alpha,
            w_reflection=w.beta,
            w_invalid=w.gamma,
        )
        - w.alpha
    )
    parts = {
        "task": float(task),
        "format": 0.0 if format_ok else -w.alpha,
        "reflection": w.beta if reflection else 0.0,
        "invalid": -w.gamma if invalid else 0.0,
    }
    parts["shaped"] = float(task) + shaped_terms
    parts["weights"] = asdict(w)
    return parts


def episode_parts(
    *, success: bool, format_ok: bool, reflection: bool, invalid: bool, w: RewardWeights
) -> dict:
    """composite_reward's terms and value over a whole episode (training/online.py's rollout reward)."""
    return {
        "success": bool(success),
        "format_ok": bool(format_ok),
        "reflection_ok": bool(reflection),
        "invalid": bool(invalid),
        "reward": composite_reward(
            success,
            format_ok,
            reflection,
            invalid,
            w_format=w.alpha,
            w_reflection=w.beta,
            w_invalid=w.gamma,
        ),
        "weights": asdict(w),
    }
