"""Curation: filters that score every step and keep or drop it with a reason.

base (the Filter framework), steps (the filters in their fixed order),
pipeline (`curate`), curated_table (ordered reading, output tables, the
curated store), phash / neardup (near duplicates), pii (scrubbing), judge
(the VLM judge). No Dagster here.
"""
