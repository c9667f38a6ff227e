"""`python -m trajforge.store.object_cat URL`: stream one object (any fsspec URL) to stdout,
for webdataset's `pipe:` URLs. Credentials and endpoint come from the environment."""

from __future__ import annotations

import shutil
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m trajforge.store.object_cat URL", file=sys.stderr)
        return 2
    import fsspec

    try:
        with fsspec.open(argv[0], "rb") as src:
            shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
    except FileNotFoundError:
        print(f"{argv[0]}: no such object", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
