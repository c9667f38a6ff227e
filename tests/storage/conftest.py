"""Object-storage fixtures. `s3_server` itself comes from tests/s3_server.py
(a plugin that tests/conftest.py registers, so other folders have it too)."""

import pytest

from trajforge.store.object_store import open_raw_store


@pytest.fixture
def s3_store(s3_server):
    """An ObjectRawStore on a fresh s3:// prefix of the session's moto server."""
    return open_raw_store(s3_server.url("store"), storage_options=s3_server.storage_options)
