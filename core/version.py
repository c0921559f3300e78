"""Versions: Spindle's own, and the Tarantool version it speaks for (greeting, box.info)."""
SPINDLE_VERSION = "0.1.0"
TARANTOOL_VERSION = "2.6.0"
# box.info.version / _schema 'version' as peers expect to see it
VERSION_STRING = f"{TARANTOOL_VERSION}-0-spindle{SPINDLE_VERSION}"
