"""What the assets show: per-asset figures (`figures`), small PNG charts (`plots`)
and quality rates for the checks (`quality`). Pure functions over written data;
Dagster-free, like every domain package.
"""
