"""memtx's index kinds beyond TREE and HASH: the definition checks of BITSET and
RTREE (check_index_def) and their indexes (index_bitset.py: bitmaps of tuple ids;
index_rtree.py: an R-tree shaped as 2.6.0's).

(Multikey TREE indexes: index_multikey.py; functional ones: index_func.py.)
"""
from __future__ import annotations

from typing import Any

from spindle.core.box.field_types import FieldType
from spindle.core.box.index import IndexType
from spindle.core.box.index_bitset import BitsetIndex
from spindle.core.box.index_rtree import RtreeIndex
from spindle.core.iproto.errors import ClientError, ErrorCode

__all__ = ["BitsetIndex", "RtreeIndex", "check_index_def"]

RTREE_MAX_DIMENSION = 20


def check_index_def(index_def: Any, space_name: str) -> None:
    """The RTREE options as 2.6.0's index_opts_decode() reads them (of any index, as
    it does), index_def_is_valid()'s repeated part, memtx_index_def_check() for BITSET
    and RTREE and the RTREE's dimension range, as 2.6.0 words them."""
    def refuse(reason: str) -> ClientError:
        return ClientError(ErrorCode.ER_MODIFY_INDEX, index_def.name, space_name, reason)
    opts = index_def.opts
    distance = opts.get("distance")
    if distance is not None and str(distance).lower() not in ("euclid", "manhattan"):
        raise ClientError(ErrorCode.ER_WRONG_INDEX_OPTIONS, 4,
                          "distance must be either 'euclid' or 'manhattan'")
    dimension = opts.get("dimension", 2)
    if isinstance(dimension, float) and dimension.is_integer():
        dimension = int(dimension)
    if not isinstance(dimension, int) or isinstance(dimension, bool):
        raise ClientError(ErrorCode.ER_WRONG_INDEX_OPTIONS, 4, "'dimension' must be integer")
    kind, parts = index_def.type, index_def.key_def.parts
    seen = set()
    for part in parts:      # (index_def_is_valid: by field and path, whatever the type)
        if (part.fieldno, part.tokens) in seen:
            raise refuse("same key part is indexed twice")
        seen.add((part.fieldno, part.tokens))
    if kind is IndexType.BITSET:
        if len(parts) != 1:
            raise refuse("BITSET index key can not be multipart")
        if index_def.unique:
            raise refuse("BITSET can not be unique")
        if parts[0].type not in (FieldType.UNSIGNED, FieldType.STRING):
            raise refuse("BITSET index field type must be NUM or STR")
    elif kind is IndexType.RTREE:
        if len(parts) != 1:
            raise refuse("RTREE index key can not be multipart")
        if index_def.unique:
            raise refuse("RTREE index can not be unique")
        if parts[0].type is not FieldType.ARRAY:
            raise refuse("RTREE index field type must be ARRAY")
        if not 1 <= dimension <= RTREE_MAX_DIMENSION:
            # (memtx_rtree_index_new)
            raise ClientError(ErrorCode.ER_UNSUPPORTED_INDEX_FEATURE, index_def.name,
                              kind.value, space_name, "memtx",
                              f"dimension ({dimension}): must belong to range "
                              f"[1, {RTREE_MAX_DIMENSION}]")
