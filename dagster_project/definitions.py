"""The Definitions that `dagster dev -w workspace.yaml` and the CLI load."""

import dagster as dg

from dagster_project.assets.catalog import task_catalog
from dagster_project.assets.convert import CONVERT_CHECKS, converted_sets
from dagster_project.assets.crawl import web_trajectories
from dagster_project.assets.curate import curated_steps
from dagster_project.assets.environments import (
    daily_environment_crawl,
    environment_crawl_job,
    environment_files_sensor,
    environment_reverse_tasks,
    environment_trajectories,
)
from dagster_project.assets.export import web_shards
from dagster_project.assets.goal_tasks import environment_goal_tasks
from dagster_project.assets.grounding import GROUNDING_CHECKS, grounding_set
from dagster_project.assets.imports import imported_trajectories
from dagster_project.assets.mobile import mobile_trajectories
from dagster_project.assets.raw import raw_steps
from dagster_project.assets.reflection import reflection_trajectories
from dagster_project.assets.synthesis import chinese_gui_set, cot_steps, reasoning_set, task_difficulty
from dagster_project.assets.training import TRAINING_ASSETS, train_job, weekly_training
from dagster_project.checks import CHECKS
from dagster_project.checks_curate import CURATE_CHECKS
from dagster_project.checks_synthesis import SYNTHESIS_CHECKS
from dagster_project.production import production_executor
from dagster_project.resources import (
    AppiumResource,
    BrowserResource,
    SandboxResource,
    StorageResource,
    VLMResource,
)
from dagster_project.schedules import JOBS, SCHEDULES
from dagster_project.sensors import SENSORS
from dagster_project.training_launcher import TrainingLauncher

defs = dg.Definitions(
    assets=[
        task_catalog,
        web_trajectories,
        mobile_trajectories,
        environment_trajectories,
        environment_reverse_tasks,
        environment_goal_tasks,
        imported_trajectories,
        reflection_trajectories,
        raw_steps,
        curated_steps,
        web_shards,
        cot_steps,
        reasoning_set,
        chinese_gui_set,
        grounding_set,
        task_difficulty,
        converted_sets,
        *TRAINING_ASSETS,
    ],
    asset_checks=[*CHECKS, *CURATE_CHECKS, *SYNTHESIS_CHECKS, *GROUNDING_CHECKS, *CONVERT_CHECKS],
    jobs=[*JOBS, train_job, environment_crawl_job],
    schedules=[*SCHEDULES, weekly_training, daily_environment_crawl],
    sensors=[*SENSORS, environment_files_sensor],
    # TRAJFORGE_EXECUTOR: k8s (a pod per step), multiprocess, or in_process; unset = Dagster's default
    executor=production_executor(),
    resources={
        "storage": StorageResource(),
        "sandbox": SandboxResource(),
        "browser": BrowserResource(),
        "appium": AppiumResource(),
        "vlm": VLMResource(),
        "launcher": TrainingLauncher(),
    },
)
