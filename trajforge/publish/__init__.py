"""Shard sets: their format and their writer.

`shards` (the WebDataset format: sample keys, the tar writer and reader, the
manifest), `export` and its parts (`plan`, `holdout`, `samples`, `writer`,
`quarantine`, `resume`, `manifest`): the raw store or the curated steps into
split, byte-reproducible, resumable shards; `remote` publishes a set to object
storage with its manifest last.
"""
