"""Shared, session-scoped resources of the spark tests.

Spark is slow to start (10-20 s for the session, 5-9 s for its first job), so
all Spark tests share ONE local session; the data directories written by real
Tarantool and by Spindle are also made once.
"""
from __future__ import annotations

import pytest

from .datadirs import spindle_dir, tarantool_dir


@pytest.fixture(scope="session")
def tarantool_data(tmp_path_factory):
    """A data directory written by Tarantool 2.6.0 (compressed blocks, a live
    WAL tail with no EOF marker)."""
    return tarantool_dir(tmp_path_factory.mktemp("tarantool") / "data")


@pytest.fixture(scope="session")
def spindle_data(tmp_path_factory):
    """The same workload written by Spindle (clean shutdown)."""
    return spindle_dir(tmp_path_factory.mktemp("spindle") / "data")


@pytest.fixture(scope="session")
def spark():
    from spindle.spark_ext.session import start_session, stop_session
    session = start_session("local[2]")
    try:
        yield session
    finally:
        stop_session(session)
