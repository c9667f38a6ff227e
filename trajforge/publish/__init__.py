"""Shard sets: their format, the one writer every set goes through, and its parts.

`shards` (the WebDataset format: sample keys, the tar writer and reader, the
manifest), `shard_set` (the set writer: staging, split writers, hold-out,
resume after a kill, commit with the manifest last), its parts (`plan`,
`holdout`, `samples`, `writer`, `quarantine`, `resume`, `manifest`), `export`
(the raw store or the curated steps into split, byte-reproducible, resumable
shards; synthesis writes its sets through `shard_set` too); `remote`
publishes a set to object storage with its manifest last.
"""
