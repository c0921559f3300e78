"""box.session.su against Tarantool 2.6.0: before box.cfg every call is refused with
2.6.0's plain 'Please call box.cfg{} first' (whatever the arguments); after it, the
users are found."""
from __future__ import annotations

from .oracle import both


def test_su_before_and_after_box_cfg(tmp_path):
    real, ours = both("""
local function show(...) print(pcall(box.session.su, ...)) end
show('guest')
show('admin')
show('nobody')
show('admin', function() return 1 end)
show(1)
show()
local ok, e = pcall(box.session.su, 'admin')
print(type(e), box.session.user(), box.session.effective_user())
box.cfg{log_level = 1}
show('admin', function() return box.session.user(), box.session.effective_user() end)
show('guest', function() return box.session.effective_user() end)
ok, e = pcall(box.session.su, 'nobody')
print(ok, tostring(e))
show('guest')
print(box.session.user(), box.session.effective_user())
os.exit(0)
""", tmp_path)
    assert real.returncode == 0, real.stderr
    assert "Please call box.cfg{} first" in real.stdout
    assert (ours.returncode, ours.stdout) == (0, real.stdout)
