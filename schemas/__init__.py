"""Contracts of fleetgrade: pydantic models of every document and the Arrow table schemas."""

from schemas.version import FLEETGRADE_VERSION

__all__ = ["FLEETGRADE_VERSION"]
