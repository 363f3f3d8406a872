"""Imports every grader family so that the registry is complete."""

from graders import (
    builtin,  # noqa: F401
    trajectory,  # noqa: F401
)
from graders.families import observed  # noqa: F401
