"""Test helpers: a local Beam test pipeline that never tries to download the Prism runner."""

from __future__ import annotations

from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline


def local_test_pipeline() -> TestPipeline:
    return TestPipeline(runner=FnApiRunner())
