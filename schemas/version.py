"""The fleetgrade version recorded in every output row."""

FLEETGRADE_VERSION = "0.1.0"
