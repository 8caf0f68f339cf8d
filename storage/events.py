"""Turning the core's events into rows of the append-only event log.

The SDS core reports what happened as frozen dataclasses (``sds.events``:
``MessageDelivered``, ``MessageSent``, ``MessagesMissing``, ...). Storage does
not import them: :func:`event_row` reads attributes *by name*, so a new event
type, or a field added later, is logged without touching this module.

Column mapping (each only if the attribute exists and has the right type):

* ``kind``       = ``type(event).__name__``
* ``channel``    = ``channel_id`` (or ``channel``)
* ``message_id`` = ``message_id`` (a string)
* ``sender_id``  = ``sender_id`` (a string)
* ``lamport``    = ``lamport`` (or ``lamport_timestamp``), an int in 0..2**63-1
* ``size_bytes`` = ``len(data)`` (or ``len(content)``) for bytes-like payloads

Every other field goes into ``detail``, a JSON object: bytes as hex, tuples,
lists and sets as lists, nested dataclasses as objects, enums by value.
Payload bytes themselves (``data``, ``content``) are never logged, only their
size: the event log feeds an analytics pipeline and must not carry chat text.
When both are present ``size_bytes`` is ``len(data)`` (the wire size) and
``detail["content_bytes"]`` is ``len(content)``. A ``causal_history`` (up to
200 ids, ~13 KB as JSON, and already stored with the message) is logged as
its length, ``detail["causal_history_len"]``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .records import MAX_LAMPORT, EventRow

_CHANNEL_FIELDS = ("channel_id", "channel")
_LAMPORT_FIELDS = ("lamport", "lamport_timestamp")
_MESSAGE_ID_FIELDS = ("message_id",)
_SENDER_FIELDS = ("sender_id",)
_PAYLOAD_FIELDS = ("data", "content")
_COUNTED_FIELDS = ("causal_history",)
_MAX_DEPTH = 16


@functools.lru_cache(maxsize=1024)
def _dataclass_field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, fixed by its class: resolved once per event type."""
    return tuple(f.name for f in dataclasses.fields(cls))


def _field_names(event: object) -> Sequence[str]:
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        return _dataclass_field_names(type(event))
    names: list[str] = []
    for klass in type(event).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else list(slots))
    names.extend(getattr(event, "__dict__", {}))
    return [n for n in dict.fromkeys(names) if not n.startswith("__") and hasattr(event, n)]


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Convert ``value`` into something :func:`json.dumps` accepts, losslessly where it can.

    bytes become lowercase hex; tuples, lists become lists; sets become sorted
    lists; dataclasses and mappings become objects; enums become their value;
    anything else becomes its ``repr``.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if _depth >= _MAX_DEPTH:
        return repr(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name), _depth + 1)
            for f in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        items = [to_jsonable(v, _depth + 1) for v in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
    return repr(value)


_PRIMITIVE = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _names_of(event: object) -> Sequence[str]:
    cls = type(event)
    names = _FIELD_NAMES.get(cls)
    if names is not None:
        return names
    found = _field_names(event)
    if dataclasses.is_dataclass(event) and len(_FIELD_NAMES) < 1024:
        _FIELD_NAMES[cls] = tuple(found)  # fixed by the class (instances may differ otherwise)
    return found


def event_row(event: object, wall_ms: int) -> EventRow:
    """Flatten one core event into an :class:`~storage.records.EventRow` logged at ``wall_ms``.

    Never raises for an unexpected shape: unknown attributes simply land in
    ``detail``. (One per received message: written as straight loops, ~3x
    faster than with helper closures; the output is the same.)
    """
    values = {name: getattr(event, name) for name in _names_of(event)}
    used: set[str] = set()
    found: list[str | None] = []
    for candidates in (_CHANNEL_FIELDS, _MESSAGE_ID_FIELDS, _SENDER_FIELDS):
        result: str | None = None
        for name in candidates:
            if name not in values:
                continue
            value = values[name]
            if value is None:
                used.add(name)  # the column says it: NULL
            elif isinstance(value, str):
                used.add(name)
                result = str(value)
                break
        found.append(result)
    channel, message_id, sender_id = found

    lamport: int | None = None
    for name in _LAMPORT_FIELDS:
        value = values.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_LAMPORT:
            lamport = value
            used.add(name)
            break

    size: int | None = None
    sizes: dict[str, int] = {}
    for name in _PAYLOAD_FIELDS:
        value = values.get(name)
        if isinstance(value, bytes | bytearray | memoryview | str):
            length = len(value.encode()) if isinstance(value, str) else memoryview(value).nbytes
            if size is None:
                size = length
            else:
                sizes[f"{name}_bytes"] = length
            used.add(name)  # payloads are never logged, only measured

    for name in _COUNTED_FIELDS:
        value = values.get(name)
        if isinstance(value, list | tuple):
            sizes[f"{name}_len"] = len(value)
            used.add(name)

    detail = {
        name: v if type(v) in _PRIMITIVE else to_jsonable(v)
        for name, v in values.items()
        if name not in used
    }
    detail.update(sizes)
    return EventRow(
        wall_ms=wall_ms,
        kind=type(event).__name__,
        channel=channel,
        message_id=message_id,
        sender_id=sender_id,
        lamport=lamport,
        size_bytes=size,
        detail=_dumps(detail),
    )


def _dumps(detail: dict[str, Any]) -> str:
    """Compact JSON with sorted keys (orjson; json for what it refuses, e.g. huge ints)."""
    try:
        return orjson.dumps(detail, option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(detail, sort_keys=True, separators=(",", ":"))
