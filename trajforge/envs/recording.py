"""Where GuiEnvs record their episodes: a raw store's collection, or one chosen per episode.

`make(record_to=DATA_DIR)` records into `DATA_DIR/raw`, collection
`gym/<environment>`, through an EpisodeRecorder of its own (RecordEpisodes,
trajforge/envs/wrappers.py). An RL loop that plays
many envs at once, or routes each episode by its verdict (rejection sampling:
verified successes to one collection, everything else to another), makes one
EpisodeRecorder and hands it to every env (`record_to=recorder`):

    recorder = EpisodeRecorder(store, route=lambda traj: "ok" if traj.outcome == "success" else "rest",
                               audit="ok")

One writer per collection and one lock serve every env on every thread (two
TrajectoryWriters on one folder would race for part numbers); the screenshots go
to the store's content-addressed blobs as each step is taken; the guard's audit
log is the store's `audit/<audit>.jsonl`. `route` returning None leaves the episode
unrecorded (an attempt the loop will play again). The caller closes the recorder
(an env handed one leaves it open).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from schemas.records import Step, Trajectory
from trajforge.store.raw import RawStore, TrajectoryWriter

Route = Callable[[Trajectory], "str | None"]


class EpisodeRecorder:
    """Records whole episodes into `store` (see the module docstring).

    collection: every episode's collection, or `route` (a trajectory -> its
    collection, None: not recorded); audit: the audit log's collection name
    (default `collection`; required with `route`).
    """

    def __init__(
        self,
        store: RawStore | str | Path,
        collection: str | None = None,
        *,
        route: Route | None = None,
        audit: str | None = None,
    ):
        if (collection is None) == (route is None):
            raise ValueError("EpisodeRecorder: give a collection or a route, not both")
        if route is not None and audit is None:
            raise ValueError("EpisodeRecorder: a route needs the audit log's collection (audit=)")
        self.store = store if isinstance(store, RawStore) else RawStore(Path(store))
        self.collection = collection
        self._route = route
        self.blobs = self.store.blobs
        self.audit = self.store.audit_log(audit or collection)
        self._writers: dict[str, TrajectoryWriter] = {}
        self._lock = threading.Lock()
        self._closed = False

    def route(self, traj: Trajectory) -> str | None:
        return self.collection if self._route is None else self._route(traj)

    def writer(self, collection: str) -> TrajectoryWriter:
        """The collection's writer (opened on first use; one per collection)."""
        with self._lock:
            return self._writer(collection)

    def _writer(self, collection: str) -> TrajectoryWriter:
        if self._closed:
            raise RuntimeError("this EpisodeRecorder is closed")
        writer = self._writers.get(collection)
        if writer is None:
            writer = self._writers[collection] = self.store.writer(collection, batch_size=1)
        return writer

    def has(self, trajectory_id: str, collections: list[str] | tuple[str, ...]) -> str | None:
        """The first of `collections` that holds `trajectory_id` (committed or queued), else None."""
        with self._lock:
            for c in collections:
                if self._writer(c).has(trajectory_id):
                    return c
        return None

    def add(self, traj: Trajectory, steps: list[Step]) -> bool:
        """Record one finished episode where `route` says; False when it is not recorded
        (routed nowhere, or its id is stored already)."""
        collection = self.route(traj)
        if collection is None:
            return False
        with self._lock:
            return self._writer(collection).add(traj, steps)

    def close(self) -> None:
        """Commit what every writer holds and close the audit log (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers, self._writers = list(self._writers.values()), {}
        try:
            for w in writers:
                w.close()
        finally:
            self.audit.close()

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
