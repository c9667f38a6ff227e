"""`python -m trajforge.cli`: the `trajforge` command."""

from trajforge.cli import app

app()
