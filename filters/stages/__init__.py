"""The stages of curation, in order: read → judge → score → decide → scrub → write.

Each module is one stage and counts what it did; filters/pipeline.py's `curate` runs
them. read (ordered passes over the raw tables, screenshots decoded once), judge (the
VLM's verdicts), score (every filter's scores, stored), decide (keep or drop, and why),
scrub (personal data), write (the verdict tables, the curated store, the audit, the
summary).
"""
