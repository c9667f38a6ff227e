"""Predicate verifiers against the sandbox's own state verifiers, on the same end states.

    .venv/bin/python benchmarks/predicate_agreement.py [--mode quick] [--seed 0] [--apps settings,notes]

The sandbox is the one place with ground-truth goal verifiers: each template checks
the session's server-side state (sandbox/environment.py `check_state`). In one run,
with the real SandboxServer and one headless Chromium, for each (app, language) of
the sample (seed `--seed`, pop-ups off):

1. each sampled goal template's instance is played by its oracle, recorded (every
   step's URL and accessibility tree), and the session's state fetched the moment it
   ends; information templates (their plan ends in an answer, which no end state
   shows) are left out;
2. its `predicates` verifier is derived from its oracle episode as task synthesis
   derives goals (crawlers/task_candidates.py `final_goals`): every goal a step made
   that holds at the episode's end and did not after the reset, all of them as one
   conjunction (the most specific candidate the episode yields; synthesis keeps
   single goals and pairs of them, which accept at least as many end states);
3. a few random walks from reset are recorded the same way (their end state and the
   session's state);
4. every (task, end state) pair of the (app, language) is judged twice: by the
   task's template on the end state's session state (the ground truth) and by the
   task's predicates on the recorded URL and tree (schemas/predicate_eval.py). End
   states: each instance's own oracle end, the other instances' oracle ends, the
   walks' ends.

Rows (ratio = figure / baseline): agreement = agreeing pairs / pairs judged (target
>= 0.97); false accepts = pairs the predicates accept and the state rejects / pairs
the state rejects (target <= 0.01); false rejects / pairs the state accepts; per app
agreement; instances whose oracle episode yields a predicate verifier. Every
disagreement is printed with its reason.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Row, fmt_num, fmt_ratio, machine_short, pick, say  # noqa: E402

from crawlers.episode import EpisodeContext  # noqa: E402
from crawlers.guard import SafetyGuard  # noqa: E402
from crawlers.policies import RandomWalkPolicy  # noqa: E402
from crawlers.task_candidates import final_goals  # noqa: E402
from sandbox.apps import APPS  # noqa: E402
from sandbox.crawl import draw_task_device  # noqa: E402
from sandbox.environment import sandbox_app_environment  # noqa: E402
from sandbox.episode import fetch_state, run_episode  # noqa: E402
from sandbox.oracle_policy import OraclePolicy  # noqa: E402
from sandbox.tasks import TEMPLATES, build_catalog  # noqa: E402
from sandbox.tasks.base import Answer, When  # noqa: E402
from schemas.actions import ActionType  # noqa: E402
from schemas.predicate_eval import EndState, verdict  # noqa: E402
from schemas.predicates import Predicate  # noqa: E402
from schemas.records import Task  # noqa: E402
from trajforge.store.raw import RawStore  # noqa: E402

BENCH = "predicate_agreement"
SIZES = {
    "smoke": {
        "apps": ("settings",),
        "languages": ("en",),
        "templates": 3,
        "siblings": 0,
        "walks": 1,
        "walk_steps": 4,
    },
    "quick": {
        "apps": ("settings", "notes", "mail"),
        "languages": ("en", "zh"),
        "templates": 4,
        "siblings": 1,
        "walks": 2,
        "walk_steps": 6,
    },
    "full": {
        "apps": ("settings", "notes", "mail", "shop", "social"),
        "languages": ("en", "zh"),
        "templates": 5,
        "siblings": 1,
        "walks": 3,
        "walk_steps": 8,
    },
}
AGREEMENT_TARGET, FALSE_ACCEPT_TARGET = ">= 0.97", "<= 0.01"
_FINAL = (ActionType.DONE, ActionType.ANSWER)
AGAINST = ("own", "same_template", "other_template", "walk")


@dataclass
class End:
    """One recorded end state: where it came from, the screen, the session's state."""

    label: str  # "oracle <task_id>" or "walk <n>"
    url: str
    tree: str
    state: dict
    template_id: str | None = None  # an oracle's end: its task's template


@dataclass
class Instance:
    """A template instance: its task, its oracle's end, the predicates derived from it."""

    task: Task
    end: End | None = None
    predicates: list[dict] = field(default_factory=list)
    oracle_outcome: str = ""


def is_information(task: Task) -> bool:
    """Its plan ends in an answer: the goal is what is said, not a state."""
    plan = TEMPLATES[task.template_id].plan(task.params, task.language)
    return any(isinstance(s.step if isinstance(s, When) else s, Answer) for s in plan)


def sample_tasks(app: str, language: str, seed: int, n: int | None, siblings: int = 0) -> list[Task]:
    """`n` goal templates of `app` (information templates left out), one instance each,
    and up to `siblings` more instances of each on the same start state."""
    tasks = [t for t in build_catalog(1, (language,), seed, apps=[app]) if not is_information(t)]
    if n is not None and n < len(tasks):
        tasks = sorted(random.Random(f"{app}:{seed}").sample(tasks, n), key=lambda t: t.task_id)
    out = []
    for task in tasks:
        out.append(task)
        seen = [task.params]
        for k in range(siblings):
            other = sibling(task, k)
            if other is not None and other.params not in seen:
                seen.append(other.params)
                out.append(other)
    return out


def sibling(task: Task, k: int) -> Task | None:
    """Another instance of `task`'s template on the same start state (the app's data for
    its language and seed), its parameters drawn anew (the hardest other task: same
    kind of change, another target); None when the template draws none."""
    template = TEMPLATES[task.template_id]
    seed = task.params["seed"]
    data = APPS[template.app].initial_state(task.language, seed)
    try:
        params = template.sample_params(data, random.Random(f"{task.task_id}~{k}"), task.language)
    except (ValueError, IndexError):
        return None
    params = {**params, "seed": seed}
    return task.model_copy(
        update={
            "task_id": f"{task.task_id}~{k + 1}",
            "instruction": template.instruction(params, task.language),
            "params": params,
        }
    )


class Recorder:
    """Plays sandbox episodes on one browser and keeps each one's end."""

    def __init__(self, env, server_url: str, store: RawStore, seed: int):
        self.env, self.server_url, self.store, self.seed = env, server_url, store, seed
        self.guard = SafetyGuard()
        self.episodes = 0

    def play(self, task: Task, policy, label: str, max_steps: int, template=None):
        """(trajectory, steps, end); end None when the episode did not end with a final action."""
        self.episodes += 1
        tid = f"agree-{label.replace(' ', '-').replace(':', '-')}-{self.seed}"
        ctx = EpisodeContext(
            trajectory_id=tid,
            seed=self.seed,
            device=draw_task_device(task, self.seed),
            blobs=self.store.blobs,
            guard=self.guard,
            max_steps=max_steps,
        )
        traj, steps = run_episode(
            self.env, task, policy, ctx, server_url=self.server_url, distraction_rate=0.0, template=template
        )
        state = fetch_state(self.server_url, tid)["state"]  # the moment it ended
        last = steps[-1] if steps else None
        if last is None or last.action.type not in _FINAL:
            return traj, steps, None
        return (
            traj,
            steps,
            End(label, last.url, last.a11y_tree, state, template.template_id if template else None),
        )


def record_group(rec: Recorder, app: str, language: str, sizes: dict) -> tuple[list[Instance], list[End]]:
    """One (app, language): its instances played by the oracle, then its random walks."""
    environment = sandbox_app_environment(rec.server_url, app)
    instances = []
    for task in sample_tasks(app, language, rec.seed, sizes["templates"], sizes["siblings"]):
        template = TEMPLATES[task.template_id]
        traj, steps, end = rec.play(
            task, OraclePolicy(template, task), f"oracle {task.task_id}", 30, template
        )
        inst = Instance(task, end=end, oracle_outcome=traj.outcome)
        if end is not None and traj.outcome == "success":
            inst.predicates = [g.predicate for g in final_goals(steps, environment)]
        instances.append(inst)
        say(f"  {task.task_id}: oracle {traj.outcome}, {len(steps)} steps, {len(inst.predicates)} predicates")
    walks = []
    if instances:
        for n in range(sizes["walks"]):
            walk_seed = rec.seed * 1000 + n
            policy = RandomWalkPolicy(
                walk_seed, max_steps=sizes["walk_steps"], lang=language, guard=rec.guard
            )
            label = f"walk {app}:{language}:{n}"
            _, _, end = rec.play(instances[0].task, policy, label, sizes["walk_steps"] + 1)
            if end is not None:
                walks.append(end)
    return instances, walks


@dataclass
class Pair:
    app: str
    language: str
    task_id: str
    end: str
    against: str  # the end state's kind: own, same_template, other_template, walk
    state: bool
    predicates: bool
    reason: str


def judge_group(app: str, language: str, instances: list[Instance], walks: list[End]) -> list[Pair]:
    """Every usable task against every end state of its (app, language)."""
    ends = [i.end for i in instances if i.end is not None and i.oracle_outcome == "success"] + walks
    pairs = []
    for inst in instances:
        if not inst.predicates:
            continue  # no verifier: counted apart
        template = TEMPLATES[inst.task.template_id]
        preds = [Predicate.model_validate(p) for p in inst.predicates]
        for end in ends:
            state_ok = bool(template.check(inst.task, end.state, None))
            v = verdict(preds, EndState(url=end.url, a11y_tree=end.tree))
            against = (
                "walk"
                if end.template_id is None
                else "own"
                if end is inst.end
                else "same_template"
                if end.template_id == inst.task.template_id
                else "other_template"
            )
            pairs.append(
                Pair(
                    app,
                    language,
                    inst.task.task_id,
                    end.label,
                    against,
                    state_ok,
                    bool(v["success"]),
                    v["reason"],
                )
            )
    return pairs


def measure(apps, languages, templates, siblings, walks, walk_steps, seed: int = 0) -> dict:
    from crawlers.web_env import WebEnv
    from sandbox.server import SandboxServer

    sizes = {"templates": templates, "siblings": siblings, "walks": walks, "walk_steps": walk_steps}
    t0 = time.perf_counter()
    pairs: list[Pair] = []
    instances_out = []
    with (
        tempfile.TemporaryDirectory(prefix="agreement-") as tmp,
        SandboxServer() as server,
        WebEnv.launch(image_format="jpeg") as env,
    ):
        rec = Recorder(env, server.url, RawStore(Path(tmp) / "raw"), seed)
        for app in apps:
            for language in languages:
                say(f"== {app} {language}")
                instances, ends = record_group(rec, app, language, sizes)
                pairs += judge_group(app, language, instances, ends)
                instances_out += [
                    {
                        "task_id": i.task.task_id,
                        "app": app,
                        "oracle": i.oracle_outcome,
                        "predicates": i.predicates,
                    }
                    for i in instances
                ]
                say(f"   {len(instances)} instances, {len(ends)} walks")
        episodes = rec.episodes
    return {
        "seed": seed,
        "apps": list(apps),
        "languages": list(languages),
        "sizes": sizes,
        "episodes": episodes,
        "seconds": round(time.perf_counter() - t0, 1),
        "instances": instances_out,
        "pairs": [p.__dict__ for p in pairs],
    }


# ------------------------------------------------------------------ figures
def tally(pairs: list[dict]) -> dict:
    n = len(pairs)
    agree = sum(p["state"] == p["predicates"] for p in pairs)
    state_false = sum(not p["state"] for p in pairs)
    state_true = n - state_false
    fa = sum(p["predicates"] and not p["state"] for p in pairs)
    fr = sum(p["state"] and not p["predicates"] for p in pairs)
    return {
        "pairs": n,
        "agree": agree,
        "state_false": state_false,
        "state_true": state_true,
        "fa": fa,
        "fr": fr,
    }


def disagreements(result: dict) -> list[dict]:
    return [p for p in result["pairs"] if p["state"] != p["predicates"]]


def rows_from(result: dict) -> list[Row]:
    t = tally(result["pairs"])
    inst = result["instances"]
    usable = [i for i in inst if i["predicates"]]
    wrong = disagreements(result)
    note = (
        f"{len(result['apps'])} apps x {len(result['languages'])} languages, {len(inst)} instances "
        f"({len(usable)} with predicates), {result['episodes']} episodes, seed {result['seed']}, "
        f"{result['seconds']} s; {t['fa']} false accepts, {t['fr']} false rejects"
    )
    by_kind = {k: tally([p for p in result["pairs"] if p["against"] == k]) for k in AGAINST}
    extra = {"tally": t, "by_end": by_kind, "instances": inst, "disagreements": wrong[:50]}

    def row(name, fig, base, unit, base_name, target="", ex=None):
        return Row(BENCH, name, fig, base, unit, base_name, target=target, note=note, machine=machine_short(),
                   extra=ex or {})  # fmt: skip

    rows = [
        row("sandbox: predicate verdicts agreeing with the state verifier (ratio = agreement)",
            t["agree"], t["pairs"], "pairs", "(task, end state) pairs judged", AGREEMENT_TARGET, extra),
        row("sandbox: predicate false accepts (ratio = share of state-false pairs)",
            t["fa"], t["state_false"], "pairs", "pairs the state verifier rejects", FALSE_ACCEPT_TARGET),
        row("sandbox: predicate false rejects (ratio = share of state-true pairs)",
            t["fr"], t["state_true"], "pairs", "pairs the state verifier accepts"),
        row("sandbox: goal instances whose oracle episode yields a predicate verifier",
            len(usable), len(inst), "instances", "goal instances played"),
    ]  # fmt: skip
    by_app: dict[str, list[dict]] = defaultdict(list)
    for p in result["pairs"]:
        by_app[p["app"]].append(p)
    for app in result["apps"]:
        a = tally(by_app.get(app, []))
        rows.append(
            row(f"sandbox {app}: agreement", a["agree"], a["pairs"] or None, "pairs", "pairs judged",
                ex={"tally": a})
        )  # fmt: skip
    return rows


def run(mode: str) -> list[Row]:
    result = measure(**pick(mode, SIZES))
    report(result)
    return rows_from(result)


def report(result: dict) -> None:
    """The figures and every disagreement with its reason."""
    for i in result["instances"]:
        if not i["predicates"]:
            print(f"no predicate verifier: {i['task_id']} (oracle {i['oracle']})")
    for p in disagreements(result):
        kind = "FALSE ACCEPT" if p["predicates"] else "false reject"
        print(f"{kind}: task {p['task_id']} on {p['end']}: state {p['state']}, predicates: {p['reason']}")
    for r in rows_from(result):
        print(
            f"{r.name}: {fmt_num(r.figure)} vs {fmt_num(r.baseline)} {r.unit} = {fmt_ratio(r.ratio)} {r.target}"
        )
    print(f"  {rows_from(result)[0].note}")
    for kind, t in rows_from(result)[0].extra["by_end"].items():
        print(f"  against {kind} ends: {t}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="quick", choices=list(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--apps", default=None, help="comma-separated sandbox apps (default: the mode's)")
    ap.add_argument("--json", type=Path, default=None, help="write the result (every pair) here")
    args = ap.parse_args(argv)
    sizes = dict(SIZES[args.mode])
    if args.apps:
        sizes["apps"] = tuple(args.apps.split(","))
    result = measure(**sizes, seed=args.seed)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    report(result)


if __name__ == "__main__":
    main()
