"""uuid values cross the Lua/Python boundary as uuids both ways: stored in a uuid
field, read back as uuid cdata equal to the original, refused when not a uuid — the
same console output as Tarantool 2.6.0."""
from __future__ import annotations

from .oracle import console_both

STATEMENTS = """\
box.cfg{log_level = 1}
uuid = require('uuid')
s = box.schema.space.create('t', {format = {{'id', 'unsigned'}, {'u', 'uuid'}}})
_ = s:create_index('pk')
u = uuid.fromstr('11111111-1111-4111-8111-111111111111')
s:insert{1, u}
t = s:get(1)
type(t[2]), t[2] == u, tostring(t[2])
s:insert{2, 'not a uuid'}
s:replace{3, uuid.fromstr('22222222-2222-4222-8222-222222222222')}
s:select()
"""


def test_uuid_fields_round_trip_like_tarantool(tmp_path):
    theirs, ours = console_both(STATEMENTS, tmp_path)
    assert ours == theirs
