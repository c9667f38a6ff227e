"""Tasks before a crawl: the task catalog table (`catalog`) and the seeds a crawl or
an evaluation draws (`seeds`). Knows no environment: an environment's tasks come
through a `make_task` callable."""
