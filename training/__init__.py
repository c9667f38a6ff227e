"""Training on trajforge's reasoning sets: SFT, step-level GRPO, online RL, evaluation.

Plain Python and torch, no Dagster (Dagster launches the entry points through Pipes;
only training/pipes_report.py imports the small `dagster_pipes`). Entry points:
`python -m training.sft --config X.yaml` (likewise training.rl, training.online,
training.evaluate).
"""
