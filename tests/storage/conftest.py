"""Object-storage fixtures. `s3_server` itself comes from tests/s3_server.py
(a plugin that tests/conftest.py registers, so other folders have it too)."""

import pytest

from trajforge.store.raw import RawStore


@pytest.fixture
def s3_store(s3_server):
    """A RawStore on a fresh s3:// prefix of the session's moto server."""
    return RawStore(s3_server.url("store"), storage_options=s3_server.storage_options)
