# Sourced by scripts/spindle and scripts/test: make sure .venv exists and holds the
# project's current dependencies. Reinstalls only when pyproject.toml/setup.py change
# (or a different set of extras is asked for), so warm starts cost nothing.
# Usage: spindle_venv [EXTRAS]   (EXTRAS e.g. "test"; empty for runtime only)
spindle_venv() {
    local extras="${1:-}"
    local root; root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    local venv="$root/.venv"
    local python="${PYTHON:-python3}"
    if [ ! -x "$venv/bin/python" ]; then
        echo "spindle: creating $venv" >&2
        "$python" -m venv "$venv" || return 1
    fi
    local want
    want="$(cat "$root/pyproject.toml" "$root/setup.py" | sha256sum | cut -c1-16)"
    local stamp="$venv/.spindle-installed"
    # The stamp lists every extras set installed for the current dependency hash.
    if ! grep -qx "$want:${extras}" "$stamp" 2>/dev/null; then
        echo "spindle: installing dependencies${extras:+ ($extras)}" >&2
        local spec="$root"; [ -n "$extras" ] && spec="$root[$extras]"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$spec" >&2 || return 1
        # Bytecode up front: start-up time matters (a shell may set PYTHONDONTWRITEBYTECODE,
        # and then nothing would ever cache it).
        "$venv/bin/python" -m compileall -q "$root/core" "$root/lua" "$root/shell" >/dev/null || true
        grep -q "^$want:" "$stamp" 2>/dev/null || : > "$stamp"
        echo "$want:${extras}" >> "$stamp"
        # runtime deps are a subset of every extras set
        grep -qx "$want:" "$stamp" || echo "$want:" >> "$stamp"
    fi
    # The editable install's import hook costs every start ~8 ms: map the folders to
    # spindle.* with symlinks and a plain .pth path instead (scripts/lib/source_links.py).
    # Should that fail, the hook stays and still works.
    if grep -qs "^import" "$venv"/lib/python*/site-packages/__editable__.spindle-*.pth; then
        "$venv/bin/python" "$root/scripts/lib/source_links.py" "$venv" \
            || echo "spindle: keeping the editable install's import hook" >&2
    fi
    SPINDLE_ROOT="$root"
    SPINDLE_VENV="$venv"
}
