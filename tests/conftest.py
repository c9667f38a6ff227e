"""Suite-wide settings. Area fixtures live in each folder's conftest."""

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

# The moto S3 server fixture (`s3_server`) and the third-party apps (`tiddlywiki_url`,
# `datasette_url`: started once per run), for every test folder.
pytest_plugins = ["tests.s3_server", "tests.thirdparty.apps"]

# The datasets library must never try the network here.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """The first pytest process (the xdist controller, or the only one) makes a directory
    that its workers inherit through the environment: things every worker would
    otherwise build for itself (the tiny model, tests/vlm/helpers.py) are built there once."""
    from tests.vlm.helpers import SHARED_DIR_ENV

    if hasattr(config, "workerinput") or os.environ.get(SHARED_DIR_ENV):
        return
    path = tempfile.mkdtemp(prefix="trajforge-tests-")
    os.environ[SHARED_DIR_ENV] = path
    config._trajforge_shared_dir = path


def pytest_unconfigure(config):
    from tests.vlm.helpers import SHARED_DIR_ENV

    path = getattr(config, "_trajforge_shared_dir", None)
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.environ.pop(SHARED_DIR_ENV, None)
