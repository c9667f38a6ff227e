"""Recorded text made safe to quote as data inside a prompt.

Every prompt that quotes what an app showed (the judge's, the agent's, the
synthesis VLM calls', the reasoning set's) puts it between markers; escaping
`<` and `>` keeps page text from closing the block or smuggling chat special
tokens into a local model. Collection (the agent) and curation share it.
"""

from __future__ import annotations


def escape_data(text: str) -> str:
    """JSON text made safe to sit between the data markers (still valid JSON)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e")
