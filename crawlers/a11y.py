"""The aria-snapshot parser lives beside the observation, in schemas/a11y.py (curation and
synthesis read recorded trees without importing the crawlers); re-exported here."""
from schemas.a11y import (AriaNode, elements_from_snapshot, parse_line, parse_snapshot,  # noqa: F401
                          to_elements)
