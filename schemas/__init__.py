"""trajforge's data contract: the unified action space and the records."""

from .actions import ACTION_TYPES, Action, ActionType, from_pixels, to_pixels
from .errors import SchemaError
from .observation import Observation
from .records import SCHEMA_VERSION, DeviceProfile, Element, Step, Task, Trajectory, trajectory_id_for

__all__ = [
    "Action",
    "ActionType",
    "ACTION_TYPES",
    "from_pixels",
    "to_pixels",
    "SchemaError",
    "Observation",
    "SCHEMA_VERSION",
    "DeviceProfile",
    "Element",
    "Step",
    "Task",
    "Trajectory",
    "trajectory_id_for",
]
