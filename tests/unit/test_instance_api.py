"""The Box provides every member of the protocols the layers below it use
(core/instance_api.py, core/replication/instance_api.py), from its own __init__ and
class: none is left for another module to attach."""
from __future__ import annotations

import pytest

from spindle.core.instance.box import Box
from spindle.core.instance_api import InstanceApi
from spindle.core.replication.instance_api import ReplicationInstanceApi


def protocol_members(protocol: type) -> set[str]:
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls is object or cls.__name__ in ("Protocol", "Generic"):
            continue
        names.update(getattr(cls, "__annotations__", {}))
        names.update(name for name in vars(cls) if not name.startswith("_"))
    return names


@pytest.mark.parametrize("protocol", [InstanceApi, ReplicationInstanceApi])
def test_a_new_box_has_every_member(sched, protocol):
    box = Box(sched)
    members = protocol_members(protocol)
    assert {"sched", "limbo", "vclock", "read_view"} <= members
    missing = sorted(name for name in members if not hasattr(box, name))
    assert missing == []


def test_the_replication_protocol_extends_the_instance_one():
    assert protocol_members(InstanceApi) < protocol_members(ReplicationInstanceApi)
    assert "replicaset" in protocol_members(ReplicationInstanceApi)
