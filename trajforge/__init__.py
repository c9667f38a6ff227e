"""trajforge's own stages, one subpackage each (a reader finds a stage in one hop).

Lowest first; a subpackage imports only from those before it (and from `schemas/`):

- `config`: where data lives ($TRAJFORGE_DATA).
- `store/`: the raw store (Parquet steps, content-addressed blobs), its object-storage
  form, the guard's audit log, consolidation into one table, the curated output on
  object storage.
- `vlm/`: vision-language model backends behind one interface.
- `tasks/`: the task catalog table and the seeds a crawl or an evaluation draws.
- `importers/`: public GUI datasets into the raw store.
- `publish/`: the shard format and the shard-set writer (split, hold-out, quarantine,
  manifest, resume), publishing to object storage.
- `envs/`: the Gym API over environment files (above crawlers/, sandbox/ and
  synthesis/, below training/).
- `read/`: what reads a published set: the training loader, validate, stats, the
  DuckDB catalog, the viewer.
- `convert/`: a set to a trainer's own format.
- `report/`: the figures and charts the assets show.
- `cli`: the `trajforge` command, on top of everything.
"""
