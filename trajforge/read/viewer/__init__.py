"""The trajectory viewer: a static HTML site over a shard folder, and a small server for it.

    from trajforge.read.viewer import build_site, serve
    index = build_site("data/shards/demo")          # -> data/shards/demo/viewer/index.html
    server, url = serve(index.parent)               # http://127.0.0.1:<port>/
    ...
    server.shutdown()

The site works from file:// as well; `serve` is for a remote machine (ssh -L).
"""

from __future__ import annotations

from trajforge.read.viewer.serve import serve
from trajforge.read.viewer.site import build_site

__all__ = ["build_site", "serve"]
