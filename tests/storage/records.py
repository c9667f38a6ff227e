"""Small trajectories for the object-store tests (deterministic bytes, no hash seed)."""

import io

from PIL import Image

from schemas.actions import Action
from schemas.records import DeviceProfile, Step, Task, Trajectory


def png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 20), (seed % 251, (seed // 251) % 251, 20)).save(buf, format="PNG")
    return buf.getvalue()


def make_traj(store, tid: str, n: int = 3, seed: int = 0):
    task = Task(task_id=f"t-{tid}", instruction="do it", language="en", app="notes")
    shas = store.blobs.put_many([(png(seed * 16 + i), "png") for i in range(n)])
    steps = [
        Step(
            trajectory_id=tid,
            index=i,
            screenshot=sha,
            width=32,
            height=20,
            action=Action.tap(0.5, 0.5) if i < n - 1 else Action(type="done"),
        )
        for i, sha in enumerate(shas)
    ]
    traj = Trajectory(
        trajectory_id=tid,
        task=task,
        platform="web",
        app="notes",
        device=DeviceProfile(viewport_width=32, viewport_height=20),
        policy="oracle",
        outcome="success",
        verified_by="state",
        num_steps=n,
    )
    return traj, steps
