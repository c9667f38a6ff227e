"""Online RL's curriculum reads a synthesised task's difficulty where no crawl measured it."""

from __future__ import annotations

from schemas.environment import environment_from_dict
from training.online import task_difficulty
from trajforge.store.raw import RawStore


def test_a_task_files_difficulty_reaches_the_curriculum(tmp_path):
    environment = environment_from_dict(
        {
            "name": "notes",
            "platform": "web",
            "start_url": "http://127.0.0.1:9/",
            "tasks": [
                {"task_id": "easy", "instruction": "Open notes", "difficulty": 0.2},
                {"task_id": "plain", "instruction": "Close notes"},
            ],
        }
    )
    tasks = environment.as_tasks()
    assert tasks[0].params == {"difficulty": 0.2} and tasks[1].params == {}
    assert task_difficulty(RawStore(tmp_path / "raw"), tasks) == {"easy": 0.2, "plain": 0.5}
