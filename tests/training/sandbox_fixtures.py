"""The real sandbox server and one headless Chromium for the online training tests.

Import the fixtures into a test module: `from .sandbox_fixtures import sandbox, env  # noqa: F401`.
"""

from tests.sandbox_fixtures import sandbox_fixtures

sandbox, env = sandbox_fixtures("module")
