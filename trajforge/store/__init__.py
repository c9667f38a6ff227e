"""The raw store and what sits beside it.

`raw` (Parquet tables a row per step, content-addressed screenshot blobs),
`object_store` / `object_folder` / `object_cat` (the same on an fsspec URL such as
s3://), `audit` (the guard's audit log of a crawl), `consolidate` (every
collection into one validated steps table), `curated_object` (the curated output
published to object storage). Imports nothing of trajforge but `config`.
"""
