"""One of two writer processes racing for the same trajectory ids (test_object_store.py).

    python -m tests.storage.race_writer URL N ORDER_SEED
The store is reached through the AWS_* environment (tests/s3_server.py: S3Server.env).
It prints "ready" once set up and starts on a line on stdin, so both start together.
Prints a JSON line: the ids this writer committed and the ones another writer owned.
"""

import json
import random
import sys

from tests.storage.records import make_traj
from trajforge.store.object_store import open_raw_store


def main(url: str, n: int, seed: int) -> None:
    store = open_raw_store(url)
    ids = [f"task-{i:03d}" for i in range(n)]
    random.Random(seed).shuffle(ids)
    added, skipped = [], []
    w = store.writer("race", batch_size=4)
    print("ready", flush=True)
    sys.stdin.readline()
    for tid in ids:
        traj, steps = make_traj(store, tid, n=2, seed=int(tid[-3:]))
        (added if w.add(traj, steps) else skipped).append(tid)
    w.close()
    print(json.dumps({"added": added, "skipped": skipped, "lost_claims": w.lost_claims}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
