"""Fixtures of the pipeline tests: one real Dask cluster for the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.dask_cluster import Cluster, dask_cluster


@pytest.fixture(scope="session")
def dask_scheduler(tmp_path_factory) -> Iterator[Cluster]:
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1, started on first use."""
    with dask_cluster(tmp_path_factory.mktemp("dask-cluster")) as cluster:
        yield cluster
