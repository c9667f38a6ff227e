"""Reading what was published.

`loader` (the training loader: a PyTorch dataset or `datasets` over a shard set,
local or on object storage), `webdataset_urls` (plain webdataset over object
storage), `validate` and `stats` (the `trajforge validate` and `stats` commands;
`validate` checks each sample with `sample_checks` and the held-out splits with
`split_groups`),
`duckdb_catalog` (one DuckDB file over the tables and shards, `trajforge
catalog`), `viewer` (a static HTML site over a set).
"""
