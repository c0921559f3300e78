"""Wire codecs of the replication requests and replies (iproto.md §8).

Encoders produce XRow objects (the caller frames them with `encode_frame`); decoders
take XRow objects and raise ClientError(ER_INVALID_MSGPACK / ER_MISSING_REQUEST_FIELD
/ ER_PROTOCOL) on bodies 2.6.0 would refuse. Key order on the wire follows 2.6.0's
encoders (checked against the fixtures' wire captures).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spindle.core.iproto.constants import (
    BallotKey, ErrorKey, ErrorStackKey, GroupId, IprotoKey, IprotoType, RaftKey, is_error_type,
    error_code_of,
)
from spindle.core.iproto.errors import BoxError, ClientError, ErrorCode
from spindle.core.iproto.msgpack import MsgpackError, invalid_msgpack, pack, unpack
from spindle.core.iproto.request import decode_synchro_body
from spindle.core.iproto.xrow import XRow
from spindle.core.raft.raft import RaftMsg
from spindle.core.vclock import VClock

UUID_LEN = 36


# ------------------------------------------------------------------ helpers

def _body(row: XRow, what: str = "request body") -> dict:
    if row.body is None:
        raise invalid_msgpack(what)
    try:
        decoded = unpack(row.body, what)
    except MsgpackError:
        raise invalid_msgpack(what) from None
    if not isinstance(decoded, dict):
        raise invalid_msgpack(what)
    return decoded


def _uuid(value: Any, what: str = "UUID") -> str:
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str) or len(value) != UUID_LEN:
        raise invalid_msgpack(what)
    return value.lower()


def _vclock(value: Any) -> VClock:
    if not isinstance(value, dict):
        raise invalid_msgpack("invalid vclock")
    try:
        return VClock.from_wire(value)
    except (ValueError, TypeError):
        raise invalid_msgpack("invalid vclock") from None


def _map(*pairs: tuple[int, Any]) -> bytes:
    """A body map in the given key order (msgpack-python keeps dict order)."""
    return pack({key: value for key, value in pairs})


# --------------------------------------------------------------------- VOTE

def encode_vote() -> XRow:
    """VOTE (68): no body, no sync: `ce 00 00 00 03 81 00 44`."""
    return XRow(type=IprotoType.VOTE)


@dataclass
class Ballot:
    is_ro: bool = False
    is_loading: bool = False
    vclock: VClock = field(default_factory=VClock)
    gc_vclock: VClock = field(default_factory=VClock)
    is_anon: bool = False          # 2.6.1+ only (key 0x05)


def decode_ballot(row: XRow) -> Ballot:
    body = _body(row, "packet body")
    inner = body.get(IprotoKey.BALLOT)
    if not isinstance(inner, dict):
        raise invalid_msgpack("packet body")
    ballot = Ballot()
    for key, value in inner.items():
        if key == BallotKey.IS_RO:
            ballot.is_ro = bool(value)
        elif key == BallotKey.IS_LOADING:
            ballot.is_loading = bool(value)
        elif key == BallotKey.VCLOCK:
            ballot.vclock = _vclock(value)
        elif key == BallotKey.GC_VCLOCK:
            ballot.gc_vclock = _vclock(value)
        elif key == 0x05:
            ballot.is_anon = bool(value)
    return ballot


# --------------------------------------------------------------------- JOIN

def encode_join(instance_uuid: str, version_id: int = 0) -> XRow:
    """JOIN (65): `{INSTANCE_UUID: uuid}` as 2.6.0 sends it, or with the joiner's
    SERVER_VERSION after it, as 2.7.3/2.8.2+ send it: that is how a joiner says it
    understands the META stage (a 2.6 master skips the key)."""
    pairs: list[tuple[int, Any]] = [(IprotoKey.INSTANCE_UUID, instance_uuid)]
    if version_id:
        pairs.append((IprotoKey.SERVER_VERSION, version_id))
    return XRow(type=IprotoType.JOIN, body=_map(*pairs))


@dataclass
class JoinRequest:
    instance_uuid: str
    version_id: int = 0


def decode_join(row: XRow) -> JoinRequest:
    body = _body(row)
    if IprotoKey.INSTANCE_UUID not in body:
        raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, "INSTANCE_UUID")
    version = body.get(IprotoKey.SERVER_VERSION, 0)
    return JoinRequest(_uuid(body[IprotoKey.INSTANCE_UUID]),
                       version if _is_uint(version) else 0)


# ---------------------------------------------------------------- JOIN META

@dataclass
class JoinMeta:
    """What the META stage of an initial JOIN carries (2.7.3, 2.8.2+; a master
    sends it only to a joiner whose JOIN had a SERVER_VERSION): the master's
    persisted Raft term and vote, and its limbo as a PROMOTE request —
    `owner_id` the limbo's owner (also the row's REPLICA_ID, which the limbo
    takes as the PROMOTE's writer), `lsn` its confirmed LSN, `term` the greatest
    PROMOTE term the master has seen."""
    raft: RaftMsg | None = None
    owner_id: int = 0
    lsn: int = 0
    term: int = 0
    origin_id: int = 0
    has_limbo: bool = False


def encode_join_meta(raft: RaftMsg, owner_id: int, lsn: int, term: int) -> list[XRow]:
    """The META stage as relay_initial_join of 2.8.2+ sends it after OK {vclock}:
    a body-less JOIN_META, the Raft row (term and vote only, as a snapshot keeps
    them), a PROMOTE with the limbo's state, a body-less JOIN_SNAPSHOT; then
    the snapshot rows follow. (The caller puts the JOIN's sync on each.)"""
    return [XRow(type=IprotoType.JOIN_META),
            encode_raft(RaftMsg(raft.term, raft.vote)),
            encode_promote(owner_id, lsn, term, replica_id=owner_id),
            XRow(type=IprotoType.JOIN_SNAPSHOT)]


def decode_join_meta_row(meta: JoinMeta, row: XRow) -> bool:
    """One row of the META stage (after JOIN_META) into `meta`; True at the
    JOIN_SNAPSHOT that ends the stage. As applier_wait_snapshot of 2.8.2+: an
    error row is raised as the master's error; a PROMOTE and a Raft row are
    decoded (ER_INVALID_MSGPACK when malformed); any other type — an OK that
    would end the data stage while META is not over, a snapshot row — is
    ER_UNKNOWN_REQUEST_TYPE."""
    rtype = row.type
    if is_error_type(rtype):
        raise decode_error(row)
    if rtype == IprotoType.JOIN_SNAPSHOT:
        return True
    if rtype == IprotoType.PROMOTE:
        request = decode_synchro_body(row.body)
        meta.owner_id, meta.lsn, meta.term = request
        meta.origin_id = row.replica_id
        meta.has_limbo = True
    elif rtype == IprotoType.RAFT:
        meta.raft = decode_raft(row)
    else:
        raise ClientError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, rtype)
    return False


def encode_promote(owner_id: int, lsn: int, term: int, **header: Any) -> XRow:
    """PROMOTE (31, 2.6.3+): body {REPLICA_ID: the limbo's former owner, LSN: the
    last of its entries confirmed, TERM: the writer's Raft term}; the row's own
    header fields come as keyword arguments."""
    return XRow(type=IprotoType.PROMOTE, body=_map(
        (IprotoKey.REPLICA_ID, owner_id), (IprotoKey.LSN, lsn), (IprotoKey.TERM, term)),
        **header)


# ----------------------------------------------------------- FETCH_SNAPSHOT

def encode_fetch_snapshot() -> XRow:
    return XRow(type=IprotoType.FETCH_SNAPSHOT)


# ----------------------------------------------------------------- REGISTER

def encode_register(instance_uuid: str, vclock: VClock) -> XRow:
    return XRow(type=IprotoType.REGISTER, body=_map(
        (IprotoKey.INSTANCE_UUID, instance_uuid), (IprotoKey.VCLOCK, vclock.to_wire())))


@dataclass
class RegisterRequest:
    instance_uuid: str
    vclock: VClock


def decode_register(row: XRow) -> RegisterRequest:
    body = _body(row)
    if IprotoKey.INSTANCE_UUID not in body:
        raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, "INSTANCE_UUID")
    if IprotoKey.VCLOCK not in body:
        raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, "VCLOCK")
    return RegisterRequest(_uuid(body[IprotoKey.INSTANCE_UUID]),
                           _vclock(body[IprotoKey.VCLOCK]))


# ---------------------------------------------------------------- SUBSCRIBE

@dataclass
class SubscribeRequest:
    replicaset_uuid: str | None
    instance_uuid: str
    vclock: VClock
    version_id: int = 0
    anon: bool = False
    id_filter: frozenset[int] = frozenset()


def encode_subscribe(replicaset_uuid: str | None, instance_uuid: str, vclock: VClock,
                     version_id: int, anon: bool, id_filter: list[int] | None) -> XRow:
    """SUBSCRIBE (66) in 2.6.0's key order; ID_FILTER only when given."""
    pairs = [(IprotoKey.CLUSTER_UUID, replicaset_uuid or "00000000-0000-0000-0000-000000000000"),
             (IprotoKey.INSTANCE_UUID, instance_uuid),
             (IprotoKey.VCLOCK, vclock.to_wire()),
             (IprotoKey.SERVER_VERSION, version_id),
             (IprotoKey.REPLICA_ANON, bool(anon))]
    if id_filter is not None:
        pairs.append((IprotoKey.ID_FILTER, sorted(id_filter)))
    return XRow(type=IprotoType.SUBSCRIBE, body=_map(*pairs))


def decode_subscribe(row: XRow) -> SubscribeRequest:
    body = _body(row)
    if IprotoKey.INSTANCE_UUID not in body:
        raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, "INSTANCE_UUID")
    if IprotoKey.VCLOCK not in body:
        raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, "VCLOCK")
    cluster = body.get(IprotoKey.CLUSTER_UUID)
    version = body.get(IprotoKey.SERVER_VERSION, 0)
    id_filter = body.get(IprotoKey.ID_FILTER, [])
    if not isinstance(id_filter, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 32 for i in id_filter):
        raise invalid_msgpack("ID_FILTER")
    anon = body.get(IprotoKey.REPLICA_ANON, False)
    if not isinstance(anon, bool):
        raise invalid_msgpack("REPLICA_ANON")
    return SubscribeRequest(
        _uuid(cluster) if cluster is not None else None,
        _uuid(body[IprotoKey.INSTANCE_UUID]),
        _vclock(body[IprotoKey.VCLOCK]),
        version if isinstance(version, int) and not isinstance(version, bool) else 0,
        anon, frozenset(id_filter))


def encode_subscribe_response(master_id: int, vclock: VClock, replicaset_uuid: str) -> XRow:
    """OK with REPLICA_ID = the master's id; body {VCLOCK, CLUSTER_UUID}."""
    return XRow(type=IprotoType.OK, replica_id=master_id, body=_map(
        (IprotoKey.VCLOCK, vclock.to_wire()), (IprotoKey.CLUSTER_UUID, replicaset_uuid)))


@dataclass
class SubscribeResponse:
    master_id: int
    vclock: VClock
    replicaset_uuid: str | None


def decode_subscribe_response(row: XRow) -> SubscribeResponse:
    if is_error_type(row.type):
        raise decode_error(row)
    if row.type != IprotoType.OK:
        raise ClientError(ErrorCode.ER_PROTOCOL, "Invalid response to SUBSCRIBE")
    body = _body(row, "packet body")
    cluster = body.get(IprotoKey.CLUSTER_UUID)
    return SubscribeResponse(row.replica_id, _vclock(body.get(IprotoKey.VCLOCK, {})),
                             _uuid(cluster) if cluster is not None else None)


# ------------------------------------------------- vclock rows, heartbeat, ACK

def encode_vclock_row(vclock: VClock) -> XRow:
    """OK {VCLOCK: vclock}: JOIN's stage markers and the replica's ACK."""
    return XRow(type=IprotoType.OK, body=_map((IprotoKey.VCLOCK, vclock.to_wire())))


encode_ack = encode_vclock_row


def decode_vclock_row(row: XRow) -> VClock:
    """The VCLOCK of an OK row (JOIN markers, ACKs); errors are raised as they came."""
    if is_error_type(row.type):
        raise decode_error(row)
    body = _body(row, "packet body")
    if IprotoKey.VCLOCK not in body:
        raise ClientError(ErrorCode.ER_MISSING_REQUEST_FIELD, "VCLOCK")
    return _vclock(body[IprotoKey.VCLOCK])


def encode_heartbeat(master_id: int, timestamp: float) -> XRow:
    """OK with REPLICA_ID and TIMESTAMP, no body, no LSN."""
    return XRow(type=IprotoType.OK, replica_id=master_id, timestamp=timestamp)


# --------------------------------------------------------------------- RAFT

def encode_raft(msg: RaftMsg, sync: int = 0) -> XRow:
    """IPROTO_RAFT (2.6.1+): GROUP_ID LOCAL, no REPLICA_ID or LSN; the body has the
    term always and the vote, state and vclock (component 0 left out) only when
    set, as xrow_encode_raft writes them."""
    pairs: list[tuple[int, Any]] = [(RaftKey.TERM, msg.term)]
    if msg.vote:
        pairs.append((RaftKey.VOTE, msg.vote))
    if msg.state:
        pairs.append((RaftKey.STATE, msg.state))
    if msg.vclock is not None:
        pairs.append((RaftKey.VCLOCK, {k: v for k, v in msg.vclock.items() if k and v}))
    return XRow(type=IprotoType.RAFT, body=_map(*pairs), group_id=GroupId.LOCAL, sync=sync)


def decode_raft(row: XRow) -> RaftMsg:
    """xrow_decode_raft: a body-less or non-local row is malformed; every value is
    an unsigned integer (vclock LSNs too); unknown keys are skipped; the vclock
    drops component 0 and zero LSNs."""
    if row.body is None or row.group_id != GroupId.LOCAL:
        raise invalid_msgpack("malformed raft request")
    try:
        body = unpack(row.body, "raft body")
    except MsgpackError:
        raise invalid_msgpack("raft body") from None
    if not isinstance(body, dict):
        raise invalid_msgpack("raft body")
    msg = RaftMsg(term=0)
    for key, value in body.items():
        if not _is_uint(key):
            raise invalid_msgpack("raft body")
        if key == RaftKey.VCLOCK:
            if not isinstance(value, dict) or not all(
                    _is_uint(k) and _is_uint(v) for k, v in value.items()):
                raise invalid_msgpack("raft body")
            msg.vclock = {k: v for k, v in value.items() if k and v}
        elif key in (RaftKey.TERM, RaftKey.VOTE, RaftKey.STATE):
            if not _is_uint(value):
                raise invalid_msgpack("raft body")
            setattr(msg, ("term", "vote", "state")[key], value)
    return msg


def _is_uint(value: Any) -> bool:
    return type(value) is int and value >= 0


# ------------------------------------------------------------------- errors

def decode_error(row: XRow) -> BoxError:
    """The BoxError an error reply carries: the top of the ERROR stack when present
    (type, code, message), else ERROR_24 and the code in REQUEST_TYPE."""
    code = error_code_of(row.type)
    message = ""
    err_type = "ClientError"
    try:
        body = unpack(row.body, "packet body") if row.body is not None else {}
    except MsgpackError:
        body = {}
    if isinstance(body, dict):
        message = body.get(IprotoKey.ERROR_24, "")
        stack = body.get(IprotoKey.ERROR)
        if isinstance(stack, dict) and isinstance(stack.get(ErrorKey.STACK), list) \
                and stack[ErrorKey.STACK] and isinstance(stack[ErrorKey.STACK][0], dict):
            top = stack[ErrorKey.STACK][0]
            message = top.get(ErrorStackKey.MESSAGE, message)
            err_type = top.get(ErrorStackKey.TYPE, err_type)
            code = top.get(ErrorStackKey.CODE, code)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    error = BoxError(str(message), int(code) if isinstance(code, int) else 0)
    error.type = err_type if isinstance(err_type, str) else "ClientError"
    return error
