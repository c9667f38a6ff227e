"""The stages of curation, in order: read → judge → score → decide → scrub → write.

Each module is one stage, a `Stage` (base.py: a `run` over the stream of trajectories
and its own `stats`); filters/pipeline.py's `curate` chains them in `Pipeline`s. read (ordered passes over the raw tables, screenshots decoded once), judge (the
VLM's verdicts), score (every filter's scores, stored), decide (keep or drop, and why),
scrub (personal data), write (the verdict tables, the curated store, the audit, the
summary).
"""
