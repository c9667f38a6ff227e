"""Desktop environments on a real Xvfb, a real AT-SPI bus and a real Debian app (mousepad).

One DesktopEnv serves the module's driver tests; the crawl tests start their own
(as `trajforge crawl` does) and check that no X server, bus or app is left.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from schemas.actions import Action, ActionType
from schemas.environment import EnvironmentFileError, environment_from_dict, load_environment

from .procs import assert_nothing_left, session_pids

pytestmark = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("mousepad") is None,
    reason="needs Xvfb and mousepad (scripts/setup_desktop.sh)",
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "environments" / "mousepad.yaml"


def mousepad(**over) -> dict:
    raw = {
        "name": "mousepad-test",
        "platform": "desktop",
        "display": {"width": 1024, "height": 768, "dpi": 96},
        "launch": 'mousepad "$HOME/note.txt"',
        "setup": 'touch "$HOME/note.txt"',
        "wait_for": {"role": "textbox"},
        "wait_timeout_s": 20,
        "tasks": [{"task_id": "t", "instruction": "type"}],
    }
    raw.update(over)
    return raw


@pytest.fixture(scope="module")
def desktop():
    from crawlers.desktop_env import DesktopEnv

    before = session_pids()
    env = DesktopEnv(environment_from_dict(mousepad()))
    yield env
    env.close()
    assert_nothing_left(before)


# ---------------------------------------------------------------- the environment file
def test_a_desktop_file_needs_launch_not_start_url():
    env = load_environment(EXAMPLE)
    assert env.platform == "desktop" and env.start_url is None and env.display.width == 1024
    assert env.verifier.kind == "command" and env.wait_for.role == "textbox"
    with pytest.raises(EnvironmentFileError, match="field 'wait_for'.*one of"):
        environment_from_dict(mousepad(wait_for={"window": "a", "run": "true"}), source="d.yaml")
    with pytest.raises(EnvironmentFileError, match="file d.yaml.*needs 'launch'"):
        environment_from_dict({**mousepad(), "launch": None}, source="d.yaml")
    with pytest.raises(EnvironmentFileError, match="wait_for is .*not a string"):
        environment_from_dict(mousepad(wait_for="Mousepad"), source="d.yaml")
    with pytest.raises(EnvironmentFileError, match="field 'verifier'.*needs 'run'"):
        environment_from_dict(mousepad(verifier={"kind": "command"}), source="d.yaml")
    with pytest.raises(EnvironmentFileError, match="no page: use a command"):
        environment_from_dict(mousepad(verifier={"kind": "js", "expression": "1"}), source="d.yaml")
    with pytest.raises(EnvironmentFileError, match="'display' is for platform: desktop, not web"):
        environment_from_dict({**mousepad(), "platform": "web", "start_url": "http://x"}, source="d.yaml")


# ---------------------------------------------------------------- the driver
def test_reset_shows_the_app_tree_in_the_shared_element_form(desktop):
    obs = desktop.reset(f"desktop://{desktop.environment.name}")
    assert (obs.width, obs.height) == (1024, 768) and obs.screenshot[:4] == b"\x89PNG"
    assert obs.url == "desktop://mousepad-test/~/note.txt - Mousepad"
    box = obs.find(role="textbox")[0]
    assert box.visibility.is_target and box.bbox[2] - box.bbox[0] > 0.9  # the window fills the screen
    assert [e.name for e in obs.find(role="menuitem")][:3] == ["File", "Edit", "Search"]
    assert "textbox [focused]" in obs.a11y_tree
    assert desktop.tree_ms and max(desktop.tree_ms) < 2000


def test_typing_english_and_chinese_is_read_back_and_saved(desktop):
    obs = desktop.reset(f"desktop://{desktop.environment.name}")
    x, y = obs.find(role="textbox")[0].centre()
    obs = desktop.step(Action(type=ActionType.TYPE, x=x, y=y, text="Hello 世界\n你好，2024!"))
    assert obs.last_action_error is None
    assert obs.find(role="textbox")[0].name == "Hello 世界 你好，2024!"  # lines joined in the tree
    obs = desktop.step(Action(type=ActionType.KEY, text="ctrl+s"))
    status, out, _ = desktop.run_command('cat "$HOME/note.txt"', timeout_s=5)
    assert status == 0 and out == "Hello 世界\n你好，2024!"


def test_pointer_actions_and_chords(desktop):
    obs = desktop.reset(f"desktop://{desktop.environment.name}")
    x, y = obs.find(role="textbox")[0].centre()
    obs = desktop.step(Action(type=ActionType.TYPE, x=x, y=y, text="alpha beta"))
    # ctrl+a, then typing replaces the selection.
    desktop.step(Action(type=ActionType.KEY, text="ctrl+a"))
    obs = desktop.step(Action(type=ActionType.TYPE, text="gamma"))
    assert obs.find(role="textbox")[0].name == "gamma"
    # A right click opens the editor's context menu (a window of its own in the tree).
    obs = desktop.step(Action(type=ActionType.RIGHT_CLICK, x=x, y=y))
    names = {e.name for e in obs.find(role="menuitem")}
    assert {"Cut", "Copy", "Paste"} <= names, names
    obs = desktop.step(Action(type=ActionType.KEY, text="escape"))
    assert "Paste" not in {e.name for e in obs.find(role="menuitem")}
    # A click on the File menu opens it; the other gestures run without an error.
    file_menu = obs.find(name="File", role="menuitem")[0]
    obs = desktop.step(Action(type=ActionType.TAP, x=file_menu.centre()[0], y=file_menu.centre()[1]))
    assert any(e.name.startswith("Save") for e in obs.find(role="menuitem"))
    desktop.step(Action(type=ActionType.KEY, text="escape"))
    for action in (
        Action(type=ActionType.DOUBLE_TAP, x=x, y=y),
        Action(type=ActionType.LONG_PRESS, x=x, y=y, duration_ms=300),
        Action(type=ActionType.SWIPE, x=0.1, y=0.2, x2=0.5, y2=0.2),
        Action.scroll("down", x, y),
    ):
        assert desktop.step(action).last_action_error is None, action
    bad = desktop.step(Action(type=ActionType.KEY, text="volume_up"))
    assert "no X key" in bad.last_action_error


def test_reset_gives_a_fresh_home(desktop):
    desktop.reset(f"desktop://{desktop.environment.name}")
    reader = desktop.reader.proc.pid
    desktop.run_command('echo stale > "$HOME/left.txt"', timeout_s=5)
    obs = desktop.reset(f"desktop://{desktop.environment.name}")
    status, _, _ = desktop.run_command('test -e "$HOME/left.txt"', timeout_s=5)
    assert status == 1
    # The accessibility reader outlives the episode and reads the relaunched app's tree.
    assert desktop.reader.proc.pid == reader and obs.find(role="textbox")


def test_predicates_read_the_tree_and_a_command_probe(desktop):
    """A predicates verifier on the live desktop: the textbox's value in the AT-SPI tree,
    the saved file through a command probe, the window title through the URL."""
    from crawlers.env_runtime import EnvironmentRuntime

    text = "Buy milk 买牛奶"
    checks = [
        {"element": {"role": "textbox"}, "value": text},
        {"probe": "note", "equals": text},
        {"url": {"path_contains": "note.txt"}},
    ]
    verifier = {"kind": "predicates", "predicates": checks}
    raw = mousepad(
        probes={"note": {"command": 'cat "$HOME/note.txt"'}},
        tasks=[{"task_id": "note", "instruction": "Write it and save", "verifier": verifier}],
    )
    runtime = EnvironmentRuntime(environment_from_dict(raw))
    [task] = runtime.environment.as_tasks()

    def verdict(obs):
        return runtime.verify(desktop, task, obs, [], final=False, session="d1", seed=0)

    obs, task = runtime.start(desktop, task, session="d1", seed=0, device=None)
    at_reset = verdict(obs)
    assert (at_reset.done, at_reset.success) == (False, False)
    assert at_reset.reason.startswith("predicate 0 (textbox value 'Buy milk 买牛奶') fails: found 1")
    x, y = obs.find(role="textbox")[0].centre()
    obs = desktop.step(Action(type=ActionType.TYPE, x=x, y=y, text=text))
    typed = verdict(obs)  # on the screen, not saved yet
    assert typed.reason == "predicate 1 (probe note equals 'Buy milk 买牛奶') fails: value ''"
    obs = desktop.step(Action(type=ActionType.KEY, text="ctrl+s"))
    saved = verdict(obs)
    assert (saved.done, saved.success, saved.reason) == (True, True, "all 3 predicates hold"), obs.a11y_tree


# ---------------------------------------------------------------- crawls
def crawl(environment, tmp_path, policy="oracle", **how):
    from crawlers.crawl_driver import EnvCrawl
    from crawlers.env_crawl import crawl_environment
    from trajforge.store.raw import RawStore

    store = RawStore(tmp_path / "raw")
    stats = crawl_environment(environment, EnvCrawl(policy=policy, **how), store=store)
    return stats, list(store.iter_trajectories()), store


def test_oracle_crawl_records_verified_english_and_chinese_notes(tmp_path):
    before = session_pids()
    stats, trajs, store = crawl(load_environment(EXAMPLE), tmp_path)
    assert_nothing_left(before)
    by_id = {t.task.task_id: t for t in trajs}
    assert set(by_id) == {"note-en", "note-zh"} and stats.success == 2
    for t in trajs:
        assert (t.outcome, t.verified_by, t.platform) == ("success", "command", "desktop")
        assert "exited with status 0" in t.verifier_reason
    steps = [s for s in store.iter_steps() if s.trajectory_id == by_id["note-zh"].trajectory_id]
    # The verifier says done once ctrl+s saved the note: the episode ends there.
    assert [s.action.type.value for s in steps] == ["tap", "type", "key"]
    assert steps[0].target.role == "textbox" and steps[1].action.text == "买牛奶和鸡蛋"


def test_random_walk_and_a_json_verdict(tmp_path):
    env = environment_from_dict(
        mousepad(
            verifier={
                "kind": "command",
                "run": 'echo \'{"done": true, "success": false, "reason": "nope"}\'',
            },
            explore={"policy": "random_walk", "episodes": 1, "max_steps": 4},
            tasks=[{"task_id": "t", "instruction": "save", "params": {"script": [{"key": "ctrl+s"}]}}],
        )
    )
    before = session_pids()
    stats, trajs, _ = crawl(env, tmp_path / "judged")
    assert [(t.outcome, t.verifier_reason) for t in trajs] == [("failure", "nope")]
    stats, trajs, _ = crawl(env, tmp_path / "walk", policy="random_walk")
    assert stats.trajectories == 1 and stats.steps >= 1 and trajs[0].outcome in ("success", "failure")
    assert_nothing_left(before)


@pytest.mark.parametrize(
    "launch, expect",
    [
        ("echo broken >&2; exit 3", r"exited at once with status 3.*broken"),
        (["/nonexistent/app"], r"cannot start '/nonexistent/app'"),
        ("sleep 30", r"did not appear within 1 s"),
    ],
)
def test_an_app_that_does_not_start_is_an_error_and_leaves_nothing(tmp_path, launch, expect):
    env = environment_from_dict(mousepad(launch=launch, wait_for=None, wait_timeout_s=1))
    before = session_pids()
    stats, trajs, _ = crawl(env, tmp_path, retries=0)
    assert_nothing_left(before)
    assert [t.outcome for t in trajs] == ["error"] and stats.error == 1
    import re

    assert re.search(expect, trajs[0].error), trajs[0].error


@pytest.fixture
def loopback_http():
    """A real HTTP server on this machine's loopback; its URL."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("network", ["off", "listed"])
def test_network_off_puts_the_app_where_nothing_is_reachable(tmp_path, loopback_http, network):
    """The launch fetches a URL on this machine's loopback and then starts mousepad: with
    the default `network: off` the fetch fails (the app has a network of its own) while the
    app still reaches its X server and accessibility bus; with origins listed, it reaches
    the network."""
    from crawlers.desktop_env import DesktopEnv

    fetch = f"import urllib.request as u; print(u.urlopen({loopback_http!r}, timeout=3).status)"
    launch = f'python3 -c {shlex.quote(fetch)} > "$HOME/net.txt" 2>&1; exec mousepad "$HOME/note.txt"'
    over = {"launch": launch} if network == "off" else {"launch": launch, "network": [loopback_http[:-1]]}
    env = DesktopEnv(environment_from_dict(mousepad(**over)))
    try:
        obs = env.reset(f"desktop://{env.environment.name}")
        said = (env.session.home / "net.txt").read_text()
        assert any(e.role == "textbox" for e in obs.elements)  # the app runs and shows its tree
        app_net = os.readlink(f"/proc/{env.app.pid}/ns/net")
    finally:
        env.close()
    if network == "off":
        assert "Network is unreachable" in said and app_net != os.readlink("/proc/self/ns/net")
    else:
        assert said.strip() == "200" and app_net == os.readlink("/proc/self/ns/net")
