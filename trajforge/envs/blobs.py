"""Screenshots' digests without a store: what an episode keeps when nothing is recorded."""

from __future__ import annotations

import hashlib


class DigestBlobs:
    """BlobStore's `put` without the disk: the sha256 of the image, which the step loop
    compares to tell whether the screen changed. `record_to` gives the real store."""

    def put(self, data: bytes, ext: str = "png") -> str:
        return hashlib.sha256(data).hexdigest()
