"""The real sandbox server and one Chromium (WebEnv) shared by the synthesis tests (package scope)."""

from tests.sandbox_fixtures import sandbox_fixtures

sandbox, env = sandbox_fixtures("package")
