"""Curation: filters that score every step and keep or drop it with a reason.

base (the Filter framework), steps (the filters in their fixed order), config
(CurateConfig), pipeline (`curate`, which runs the stages of stages/: read, judge,
score, decide, scrub, write), phash / neardup (near duplicates), pii (detection),
pii_blur (a step's text and screenshot scrubbed), pii_ocr, pii_surrogate,
pii_sources, judge (the VLM judge). No Dagster here.
"""
