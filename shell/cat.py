"""`spindle cat FILE...`: print .xlog/.snap rows the way `tarantoolctl cat` does.

    spindle cat FILE... [--from LSN] [--to LSN] [--space ID]... [--replica ID]...
                        [--show-system] [--format yaml|json|lua]

Output is what Tarantool 2.6.0's `tarantoolctl cat` prints on stdout, byte for
byte except for the order of the keys of maps inside the data (tuple fields
and the like), which spindle prints in their MsgPack order (see cat_record and
cat_format); as tarantoolctl does, "Processing file 'FILE'" goes to stderr
before each file. Filters follow tarantoolctl's filter_xlog():
FROM <= lsn < TO; rows of system spaces (id < 512) only with --show-system or
when their space is named by --space; --replica keeps rows from those replicas
(and, with exactly one replica, stops reading a file at its first row with
lsn >= TO).

Where tarantoolctl is silent or cryptic about damage, this is explicit, on
stderr, and the exit status is 1:
* a missing/unreadable file, or one that is not an xlog/snap: one line naming
  it; the other files are still printed (tarantoolctl stops at the first);
* a corrupted block (bad magic, checksum, compression, undecodable row): the
  rows before it are printed, the message names the file and the block's
  offset, and reading resumes at the next block (tarantoolctl also skips the
  block, silently);
* a file cut inside a block (torn tail), a .snap without its EOF marker, or
  data after the EOF marker: the rows before are printed, then the message.
An .xlog that simply ends after a complete block, without the EOF marker, is
what a crash or a still-running instance leaves: a warning, exit status 0.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, BinaryIO

from spindle.core.iproto.errors import ClientError
from spindle.core.xlog.files import XlogReader
from spindle.core.xlog.format import MARKER_SIZE, DataAfterEof, XlogError, XlogHeaderError

from .cat_format import FORMATTERS
from .cat_record import CatError, build_record, record_replica_id, record_space_id

PROG = "spindle cat"
SYSTEM_SPACE_MAX = 512
UINT64_MAX = (1 << 64) - 1
# Types xlog.pairs() of 2.6.0 accepts.
READABLE_TYPES = ("SNAP", "XLOG", "RUN", "INDEX", "DATA", "VYLOG")


def _number_arg(text: str) -> int | float:
    """A number the way tarantoolctl's argparse reads one (tonumber): 12, 1e3, 0x10."""
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return int(value) if value.is_integer() else value


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Print the rows of Tarantool .xlog/.snap files, as `tarantoolctl cat` does.")
    parser.add_argument("files", nargs="+", metavar="FILE", help=".xlog or .snap file")
    parser.add_argument("--from", dest="from_lsn", type=_number_arg, default=0, metavar="LSN",
                        help="show rows with lsn >= LSN")
    parser.add_argument("--to", dest="to_lsn", type=_number_arg, default=UINT64_MAX,
                        metavar="LSN", help="show rows with lsn < LSN")
    parser.add_argument("--space", type=_number_arg, action="append", metavar="ID",
                        help="show only rows of this space (repeatable)")
    parser.add_argument("--replica", type=_number_arg, action="append", metavar="ID",
                        help="show only rows from this replica id (repeatable)")
    parser.add_argument("--show-system", action="store_true",
                        help="also show rows of system spaces (id < 512)")
    parser.add_argument("--format", choices=sorted(FORMATTERS), default="yaml",
                        help="output format (default: yaml)")
    return parser.parse_args(argv)


class _Output:
    """stdout (buffered) and stderr kept in order: stdout is flushed before
    anything goes to stderr."""

    def __init__(self, out: BinaryIO, err: BinaryIO):
        self.out = out
        self.err = err
        self.pending: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> None:
        self.pending.append(data)
        self.size += len(data)
        if self.size >= 1 << 16:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.out.write(b"".join(self.pending))
            self.pending.clear()
            self.size = 0
        self.out.flush()

    def message(self, text: str) -> None:
        self.flush()
        self.err.write(text.encode("utf-8", "surrogateescape") + b"\n")
        self.err.flush()


def _number(value: Any) -> float | None:
    """A Lua number (or 64-bit cdata) as a Python number, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    return None


class _Cat:
    def __init__(self, options: argparse.Namespace, output: _Output):
        self.options = options
        self.output = output
        self.formatter = FORMATTERS[options.format]
        self.failed = False

    def error(self, path: str, text: str, later: list[str] | None = None) -> None:
        self.failed = True
        self._say(f"{PROG}: {path}: {text}", later)

    def warning(self, path: str, text: str, later: list[str] | None = None) -> None:
        self._say(f"{PROG}: {path}: warning: {text}", later)

    def _say(self, text: str, later: list[str] | None) -> None:
        if later is None:
            self.output.message(text)
        else:
            later.append(text)

    # -- filters (tarantoolctl's filter_xlog) -----------------------------------

    def _verdict(self, lsn: int, record) -> str:
        """'show', 'skip' or 'stop'."""
        opts = self.options
        spaces, replicas = opts.space, opts.replica
        sid = _number(record_space_id(record))
        has_sid = record_space_id(record) is not None
        rid = _number(record_replica_id(record))
        if replicas and len(replicas) == 1 and replicas[0] == rid and lsn >= opts.to_lsn:
            return "stop"
        if lsn < opts.from_lsn or lsn >= opts.to_lsn:
            return "skip"
        if (not spaces and has_sid and sid is not None and sid < SYSTEM_SPACE_MAX
                and not opts.show_system):
            return "skip"
        if spaces and (not has_sid or sid not in spaces):
            return "skip"
        if replicas and rid not in replicas:
            return "skip"
        return "show"

    # -- one file -------------------------------------------------------------------

    def run_file(self, path: str) -> None:
        output = self.output
        output.message(f"Processing file '{path}'")
        try:
            reader = XlogReader(path, force_recovery=True)
        except FileNotFoundError:
            self.error(path, "no such file")
            return
        except IsADirectoryError:
            self.error(path, "is a directory, not an .xlog/.snap file")
            return
        except PermissionError:
            self.error(path, "permission denied")
            return
        except OSError as exc:
            self.error(path, f"can't read: {exc.strerror or exc}")
            return
        except (XlogHeaderError, ClientError) as exc:
            self.error(path, _header_problem(path, exc))
            return
        with reader:
            if reader.meta.filetype not in READABLE_TYPES:
                self.error(path, f"not an .xlog/.snap file: unsupported file type "
                                 f"'{reader.meta.filetype}'")
                return
            at_end: list[str] = []
            printed = self._rows(path, reader, at_end)
        if printed and self.options.format == "yaml":
            output.write(b"...\n\n")
        for text in at_end:
            output.message(text)

    def _rows(self, path: str, reader: XlogReader, at_end: list[str]) -> bool:
        """Print the rows; what is wrong with the end of the file goes to `at_end`,
        to be said after the YAML document is closed."""
        output = self.output
        formatter = self.formatter
        printed = False
        reported = 0
        good_end = reader.header_size
        warnings: list[str] = []
        stop = False
        try:
            for block in reader.blocks():
                reported = self._report_skips(path, reader, reported)
                good_end = block.offset + block.size
                for row in block.rows:
                    try:
                        record = build_record(row, warnings)
                        verdict = self._verdict(row.lsn, record)
                        if verdict == "stop":
                            stop = True
                            break
                        if verdict == "skip":
                            continue
                        text = formatter(record)
                    except (CatError, RecursionError) as exc:
                        reason = (exc if isinstance(exc, CatError)
                                  else "values nested too deeply to print")
                        self.error(path, f"row with lsn {row.lsn} at block offset "
                                         f"{block.offset}: {reason}")
                        continue
                    finally:
                        if warnings:
                            for warning in warnings:
                                self.warning(path, f"row with lsn {row.lsn}: {warning}")
                            warnings.clear()
                    if text is not None:
                        output.write(text)
                        printed = True
                if stop:
                    break
        except DataAfterEof as exc:
            reported = self._report_skips(path, reader, reported)
            size = _file_size(path)
            extra = f"{size - exc.offset - MARKER_SIZE} bytes of " if size is not None else ""
            self.error(path, f"{extra}data after the EOF marker at offset {exc.offset}",
                       at_end)
            return printed
        except XlogError as exc:     # pragma: no cover - force_recovery skips the rest
            reported = self._report_skips(path, reader, reported)
            self.error(path, f"unreadable at offset {reader.position}: {_reason(exc)}", at_end)
            return printed
        reported = self._report_skips(path, reader, reported)
        if stop or reader.eof_marker:
            return printed
        ended_in_skip = bool(reader.skipped) and reader.skipped[-1].offset >= good_end
        tail = reader.torn_tail
        if tail is not None and not (ended_in_skip and tail.available < MARKER_SIZE):
            self.error(path, f"truncated: the file ends inside the block at offset "
                             f"{tail.offset} ({tail.available} of at least {tail.needed} bytes "
                             f"present); rows from offset {tail.offset} on are lost", at_end)
        elif ended_in_skip:
            self.error(path, "no valid block after the corrupted data up to the end of "
                             "the file (and no EOF marker)", at_end)
        elif reader.meta.filetype == "SNAP":
            self.error(path, f"truncated: no EOF marker after the last block (offset "
                             f"{good_end}); a snapshot without it is incomplete", at_end)
        else:
            self.warning(path, f"no EOF marker after the last block (offset {good_end}): "
                               "the file was not closed cleanly, or is still being written",
                         at_end)
        return printed

    def _report_skips(self, path: str, reader: XlogReader, reported: int) -> int:
        for err in reader.skipped[reported:]:
            offset = getattr(err, "offset", None)
            reason = getattr(err, "reason", None) or _reason(err)
            where = f" at offset {offset}" if offset is not None else ""
            extra = ""
            row_offset = getattr(err, "row_offset", None)
            if row_offset is not None:
                extra = f" (row at payload offset {row_offset})"
            self.error(path, f"corrupted block{where}: {reason}{extra}; "
                             "skipped to the next block")
        return len(reader.skipped)


def _header_problem(path: str, exc: BaseException) -> str:
    reason = _reason(exc).removeprefix(f"{path}: ")
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        head = b""
    if not head:
        return "empty file, not an .xlog/.snap file"
    filetype = head.split(b"\n", 1)[0].decode("latin-1")
    if (filetype in READABLE_TYPES and b"\n\n" not in head
            and reason == "Unexpected end of file"):
        return "truncated: the file ends inside its text header"
    return f"not an .xlog/.snap file: bad header ({reason})"


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return text or type(exc).__name__


def _file_size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


# Values are decoded and printed recursively: room for deeply nested ones
# (tarantoolctl prints a few hundred levels in yaml).
RECURSION_LIMIT = 10000


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options = parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    output = _Output(sys.stdout.buffer, sys.stderr.buffer)
    cat = _Cat(options, output)
    try:
        for path in options.files:
            cat.run_file(path)
        output.flush()
    except BrokenPipeError:
        # `spindle cat FILE | head`: stop quietly, like other tools.
        try:
            sys.stdout = None   # type: ignore[assignment]
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        except OSError:
            pass
        return 1
    except KeyboardInterrupt:
        return 130
    return 1 if cat.failed else 0


if __name__ == "__main__":
    sys.exit(main())
