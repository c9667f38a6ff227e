from __future__ import annotations

import pytest

from tests.export.shard_fixtures import Built, build_store


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return build_store(tmp_path_factory.mktemp("raw"))
