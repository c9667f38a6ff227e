"""Launcher-style cards (a JupyterLab-like launcher, tests/crawlers/pages/launcher.html) on
real Chromium: each card is recorded with the name Chromium's tree gives it, and two cards
of one name are told apart by `nth` (document order), as a demonstration names them."""

from __future__ import annotations

import trajforge.envs as tf_envs
from crawlers.scripted import find_element


def _launcher_env(pages_url, tmp_path, script=None):
    env_file = tmp_path / "launcher.yaml"
    task = {"task_id": "open", "instruction": "Open a file", "params": {"script": script or []}}
    env_file.write_text(
        f"""name: launcher
platform: web
start_url: {pages_url}/launcher.html
viewport: {{width: 800, height: 600}}
tasks: [{task!r}]
""".replace("'", '"'),
        encoding="utf-8",
    )
    return tf_envs.make(env_file)


def test_cards_are_recorded_with_the_names_chromium_gives(pages_url, tmp_path):
    env = _launcher_env(pages_url, tmp_path)
    try:
        env.reset(seed=0)
        elements = env.unwrapped.observation.elements
    finally:
        env.close()
    named = {(e.role, e.name) for e in elements}
    assert ("button", "Text File") in named  # role=button named by its content, not ""
    assert ("generic", "Create a new markdown file") in named  # named by its title
    pythons = [e for e in elements if e.role == "clickable" and e.name == "Python File"]
    assert len(pythons) == 2 and pythons[0].bbox[0] < pythons[1].bbox[0]
    # Same role and name: `nth` counts them in document order.
    ref = {"role": "clickable", "name": "Python File"}
    assert find_element(elements, {**ref, "nth": 1}) is pythons[1]
    assert find_element(elements, ref) is pythons[0]


def test_a_tap_on_the_second_of_two_same_named_cards_reaches_it(pages_url, tmp_path):
    env = _launcher_env(pages_url, tmp_path)
    try:
        env.reset(seed=0)
        second = find_element(
            env.unwrapped.observation.elements, {"role": "clickable", "name": "Python File", "nth": 1}
        )
        x0, y0, x1, y1 = second.bbox
        width, height = env.unwrapped.screen_size
        env.step({"type": "tap", "x": (x0 + x1) / 2 * width, "y": (y0 + y1) / 2 * height})
        made = env.unwrapped.browser.page.evaluate("document.body.dataset.made")
    finally:
        env.close()
    assert made == "py2"
