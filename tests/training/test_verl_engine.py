"""RL on verl 0.9.1 with verl's own classes (CPU, .venv-trainers through a subprocess):
the converter's rows scored by verl's reward manager with our reward file, the GRPO
advantages from verl's own ray_trainer.compute_advantage (the registered estimator) and the
policy loss from verl's registry, compared with training/grpo.py, and the engine's command composed and validated by verl's config
machinery for one node and for 2 nodes x 8 GPUs. No training step: verl's rollout needs
vLLM or SGLang on a GPU."""

from __future__ import annotations

import json
import os
import shlex

import pytest
import torch
from typer.testing import CliRunner

from synthesis import gui_reward
from tests.convert.trainer_venvs import TRAINERS, run_in_venv
from tests.training.conftest import build_small_reasoning_set
from tests.vlm.helpers import tiny_model_path
from training.engines import TrainRequest, plan
from training.grpo import group_advantages, scale_negatives
from trajforge.cli import app
from trajforge.convert import convert

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# argv: the plan's argv (JSON), the tokenizer's folder, a file of cases. Prints one JSON line.
VERL_SCRIPT = r"""
import asyncio, json, os, sys
import numpy as np, torch
import verl  # imports training.engines.verl_ext: VERL_USE_EXTERNAL_MODULES
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.reward import load_reward_manager
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.workers.config import ActorConfig
from training.grpo import grpo_loss

argv, tok_dir = json.loads(sys.argv[1]), sys.argv[2]
cases = json.loads(open(sys.argv[3], encoding="utf-8").read())
overrides = argv[argv.index("verl.trainer.main_ppo") + 1:]
conf_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
with initialize_config_dir(config_dir=conf_dir, version_base=None):
    cfg = compose(config_name="ppo_trainer", overrides=overrides)
OmegaConf.resolve(cfg)
validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
out = {"env": dict(cfg.ray_kwargs.ray_init.runtime_env.env_vars), "nnodes": cfg.trainer.nnodes,
       "gpus": cfg.trainer.n_gpus_per_node, "n": cfg.actor_rollout_ref.rollout.n,
       "reward_path": cfg.reward.custom_reward_function.path, "ref": need_reference_policy(cfg),
       "kl": [cfg.actor_rollout_ref.actor.use_kl_loss, cfg.actor_rollout_ref.actor.kl_loss_type,
              cfg.actor_rollout_ref.actor.kl_loss_coef]}
if not cases:
    print(json.dumps(out)); sys.exit()

# verl's reward manager (reward.reward_manager: naive) with our compute_score, on the rows' texts
tok = AutoTokenizer.from_pretrained(tok_dir)
manager = load_reward_manager(cfg, tok)
out["manager"] = type(manager).__module__ + "." + type(manager).__name__
scores = []
for case in cases:
    prompt = tok(case["prompt"], return_tensors="pt").input_ids[:, -8:]
    resp = tok(case["response"], return_tensors="pt").input_ids
    data = DataProto.from_dict(
        tensors={"prompts": prompt, "responses": resp,
                 "attention_mask": torch.ones(1, prompt.shape[1] + resp.shape[1], dtype=torch.long)},
        non_tensors={"data_source": np.array([case["data_source"]], dtype=object),
                     "reward_model": np.array([case["reward_model"]], dtype=object),
                     "extra_info": np.array([dict(case["extra_info"])], dtype=object)})
    got = manager.loop.run_until_complete(manager.run_single(data))
    scores.append(got["reward_score"])
out["scores"] = scores

# verl's own ray_trainer.compute_advantage on a batch of the scored responses, called as
# RayPPOTrainer.fit calls it (it looks the configured estimator up in verl's registry)
from verl.trainer.ppo.ray_trainer import compute_advantage
rewards = torch.tensor(scores, dtype=torch.float32)
T = 5
tlr = torch.zeros(len(scores), T); tlr[:, -1] = rewards
uids = np.array([c["uid"] for c in cases], dtype=object)
batch = DataProto.from_dict(tensors={"token_level_rewards": tlr, "response_mask": torch.ones(len(scores), T)},
                            non_tensors={"uid": uids})
batch = compute_advantage(batch, adv_estimator=cfg.algorithm.adv_estimator, gamma=cfg.algorithm.gamma,
                          lam=cfg.algorithm.lam, num_repeat=cfg.actor_rollout_ref.rollout.n,
                          norm_adv_by_std_in_grpo=cfg.algorithm.get("norm_adv_by_std_in_grpo", True),
                          config=cfg.algorithm)
adv = batch.batch["advantages"]
out["advantages"] = adv[:, 0].tolist()
out["adv_uniform"] = bool((adv == adv[:, :1]).all())

# the policy loss from verl's registry against training.grpo.grpo_loss (beta 0: verl adds the KL)
g = torch.Generator().manual_seed(0)
B, L = 6, 7
logp, old = -torch.rand(B, L, generator=g) * 2, -torch.rand(B, L, generator=g) * 2
mask = (torch.rand(B, L, generator=g) > 0.3).float(); mask[:, 0] = 1
adv = torch.randn(B, generator=g)
fn = core_algos.get_policy_loss_fn(cfg.actor_rollout_ref.actor.policy_loss.loss_mode)
ours, metrics = fn(old, logp, adv.unsqueeze(-1).expand(B, L), mask, "seq-mean-token-mean", actor)
ref, st = grpo_loss(logp, old, old, adv, mask, clip=actor.clip_ratio, beta=0.0)
out["loss"] = [float(ours), float(ref)]
out["clipfrac"] = [metrics["actor/pg_clipfrac"], st["clip_frac"]]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def verl_rows(tmp_path_factory):
    """The small reasoning set, and its rows as the real converter writes them for verl."""
    root = tmp_path_factory.mktemp("verl-engine")
    set_dir = build_small_reasoning_set(root, n_traj=6)
    convert(set_dir, "verl", root / "run" / "data")
    import pyarrow.parquet as pq

    rows = pq.read_table(root / "run" / "data" / "train.parquet").to_pylist()
    return set_dir, root / "run", rows


def _run(argv: list[str], tmp_path, cases: list[dict]) -> dict:
    env_argv = json.dumps(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    return run_in_venv(
        TRAINERS,
        "import os, sys; sys.path.insert(0, os.getcwd())\n"
        "os.environ['VERL_USE_EXTERNAL_MODULES'] = 'training.engines.verl_ext'\n" + VERL_SCRIPT,
        ROOT,
        env_argv,
        str(tiny_model_path()),
        str(cases_file),
        timeout=600,
    )


def _outside(gt: dict) -> list[int]:
    """A point in the frame far from the target (the opposite corner of the screen)."""
    w, h = gt["size"]
    x, y = gt["point_norm"]
    far = (0.0 if x > 0.5 else 1.0, 0.0 if y > 0.5 else 1.0)
    if gt["coords"] == "pixels":
        return [round(far[0] * w), round(far[1] * h)]
    return [round(far[0] * 999), round(far[1] * 999)]


def test_verl_scores_groups_and_loss_with_our_reward_and_registry(verl_rows, tmp_path):
    set_dir, out, rows = verl_rows
    launch = plan("verl", TrainRequest("rl", set_dir, str(tiny_model_path()), out, gpus=1))
    cases, kinds = [], []
    for i, row in enumerate(rows):
        gt = json.loads(row["reward_model"]["ground_truth"])
        answer = row["extra_info"]["answer"]
        junk = ["I would tap the button", "<answer>{}</answer>", '{"action_type": "Fly"}']
        texts = [("gt", answer)] + [("malformed", j) for j in junk]
        if gt["point_norm"] is not None and gt["action_type"] in ("Click", "LongPress", "Swipe"):
            obj = json.loads(answer[answer.index("{") : answer.rindex("}") + 1])
            texts.append(
                ("outside", "<answer>" + json.dumps({**obj, "point_2d": _outside(gt)}) + "</answer>")
            )
        for kind, text in texts:
            kinds.append((kind, gt["action_type"], i))
            cases.append(
                {
                    "prompt": row["prompt"][1]["content"],
                    "response": text,
                    "data_source": row["data_source"],
                    "reward_model": row["reward_model"],
                    "extra_info": row["extra_info"],
                    # a group per row: its answer, junk, a miss (p_hat 1/4 or 1/5); on even
                    # rows the answer alone (p_hat 0 for the rest: negatives halved)
                    "uid": f"solo{i}" if kind == "gt" and i % 2 == 0 else f"row{i}",
                }
            )
    got = _run(launch.argv, tmp_path, cases)
    assert got["manager"].endswith("reward_manager.naive.NaiveRewardManager")
    assert got["reward_path"] == str(out / "data" / "reward.py")
    by_kind = {}
    for (kind, atype, _), s in zip(kinds, got["scores"], strict=True):
        by_kind.setdefault(kind, []).append((atype, s))
    top = gui_reward.W_FORMAT + gui_reward.W_MATCH
    assert all(s == pytest.approx(top) for _, s in by_kind["gt"])  # the answer earns the maximum
    assert all(s == 0.0 for _, s in by_kind["malformed"])  # the format failure
    assert by_kind["outside"] and all(s == pytest.approx(gui_reward.W_FORMAT) for _, s in by_kind["outside"])
    assert {"Swipe", "LongPress"} <= {a for a, _ in by_kind["gt"]}  # swipes and long presses score
    assert any(a == "Swipe" for a, _ in by_kind["outside"])

    # the registered estimator equals training/grpo.py's reference, group by group
    scores = torch.tensor(got["scores"])
    want = torch.zeros_like(scores)
    uids = [c["uid"] for c in cases]
    scaled = 0
    for uid in set(uids):
        idx = [j for j, u in enumerate(uids) if u == uid]
        r = scores[idx]
        p_hat = float((r >= gui_reward.W_MATCH - 1e-9).float().mean())
        want[idx] = scale_negatives(group_advantages(r), p_hat, 0.5, 1.5)
        scaled += bool((want[idx] != group_advantages(r)).any())
    assert scaled > 0  # the success-adaptive scaling acted
    assert torch.allclose(torch.tensor(got["advantages"]), want, atol=1e-6) and got["adv_uniform"]
    assert any(a < 0 for a in got["advantages"]) and any(a > 0 for a in got["advantages"])
    ours, ref = got["loss"]
    assert ours == pytest.approx(ref, abs=1e-6) and ours != 0.0
    assert got["clipfrac"][0] == pytest.approx(got["clipfrac"][1], abs=1e-6)
    assert got["kl"] == [True, "low_var_kl", 0.001] and got["ref"] is True


def test_two_nodes_of_eight_gpus_compose_and_validate_in_verls_config(verl_rows, tmp_path):
    set_dir, out, _ = verl_rows
    launch = plan("verl", TrainRequest("rl", set_dir, "/models/Qwen2.5-VL-7B", out, gpus=8, nodes=2))
    got = _run(launch.argv, tmp_path, [])
    assert (got["nnodes"], got["gpus"], got["n"]) == (2, 8, 8)
    assert got["env"]["VERL_USE_EXTERNAL_MODULES"] == "training.engines.verl_ext"
    assert got["env"]["PYTHONPATH"] == ROOT
    # a batch verl cannot spread over the GPUs is refused by verl's own validate_config
    with pytest.raises(AssertionError, match="must be divisible"):
        _run(launch.argv + ["actor_rollout_ref.rollout.n=3"], tmp_path, [])


def test_dry_run_prints_the_convert_and_verl_commands(verl_rows, tmp_path):
    set_dir, _, _ = verl_rows
    out = tmp_path / "dry"
    res = CliRunner().invoke(
        app,
        ["train", "rl", "--engine", "verl", "--set", str(set_dir), "--model", "tiny", "--out", str(out)]
        + ["--gpus", "8", "--nodes", "2", "--max-steps", "3", "--dry-run"],
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert f"# before the command: convert {set_dir} to verl under {out / 'data'}" in res.output
    assert f"# {out / 'data'}: would be converted" in lines
    verl_cmd = shlex.split(lines[2])
    assert verl_cmd[:2] == ["PYTHONPATH=" + ROOT, "VERL_USE_EXTERNAL_MODULES=training.engines.verl_ext"]
    for want in (
        "algorithm.adv_estimator=trajforge_gui_grpo",
        "actor_rollout_ref.rollout.n=8",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=8",
        "trainer.total_training_steps=3",
        f"reward.custom_reward_function.path={out / 'data' / 'reward.py'}",
    ):
        assert want in verl_cmd, want
    assert not out.exists()  # a dry run converts nothing


def test_easyr1_reward_signature_and_config(verl_rows, tmp_path):
    """EasyR1 is not installable here (not on PyPI): its reward function contract
    (examples/reward_function: a list of {"response", "response_length", "ground_truth"}
    -> a list of {"overall", "format", "accuracy"}) on the converter's EasyR1 rows, the
    file loaded by path as EasyR1 loads it, and the YAML the engine writes."""
    import importlib.util

    import pyarrow.parquet as pq
    import yaml

    set_dir, _, _ = verl_rows
    out = tmp_path / "e"
    convert(set_dir, "easyr1", out / "data")
    spec = importlib.util.spec_from_file_location("custom_reward_fn", out / "data" / "reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # stdlib only: loads without trajforge on the path
    rows = pq.read_table(out / "data" / "train.parquet").to_pylist()
    inputs = [{"response": r["sft_answer"], "response_length": 9, "ground_truth": r["answer"]} for r in rows]
    inputs += [{"response": "no answer", "response_length": 2, "ground_truth": rows[0]["answer"]}]
    got = module.compute_score_easyr1(inputs)
    assert [g["overall"] for g in got[:-1]] == [pytest.approx(1.0)] * len(rows)
    assert got[-1] == {"overall": 0.0, "format": 0.0, "accuracy": 0.0}
    assert module.compute_score_easyr1(inputs[0])["accuracy"] == 1.0  # sequential: one input

    launch = plan("easyr1", TrainRequest("rl", set_dir, "/m", out, gpus=8, nodes=2))
    cfg = yaml.safe_load(launch.files["easyr1.yaml"])
    assert cfg["worker"]["reward"]["reward_function"] == f"{out / 'data' / 'reward.py'}:compute_score_easyr1"
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"], cfg["worker"]["rollout"]["n"]) == (
        2,
        8,
        8,
    )
    assert [(c.format, c.out) for c in launch.conversions] == [("easyr1", out / "data")]
