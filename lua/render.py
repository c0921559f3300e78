"""Console output: the values of one statement as Tarantool's console prints them."""
from __future__ import annotations

from typing import Any

import yaml


def render_values(values: list[Any], error: str | None, fmt: str = "yaml") -> str:
    if error is not None:
        values = [{"error": error}]
    if fmt == "lua":
        return render_lua(values)
    if not values:
        return "---\n...\n"
    body = yaml.safe_dump(values, default_flow_style=False, allow_unicode=True,
                          sort_keys=False)
    return f"---\n{body}...\n"


def render_lua(values: list[Any]) -> str:
    return ", ".join(_lua_literal(v) for v in values) + ";\n"


def _lua_literal(value: Any) -> str:
    if value is None:
        return "nil"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "{" + ", ".join(_lua_literal(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_lua_literal(v)}" for k, v in value.items()) + "}"
    return '"' + str(value) + '"'
