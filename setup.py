"""Shim for Dataflow's ``--setup_file``: workers pip-install this package from source.

All metadata lives in pyproject.toml; setuptools reads it from there.
"""

from setuptools import setup

setup()
