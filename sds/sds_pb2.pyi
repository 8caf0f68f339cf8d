from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HistoryEntry(_message.Message):
    __slots__ = ("message_id", "retrieval_hint", "sender_id")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_HINT_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    retrieval_hint: bytes
    sender_id: str
    def __init__(self, message_id: _Optional[str] = ..., retrieval_hint: _Optional[bytes] = ..., sender_id: _Optional[str] = ...) -> None: ...

class SdsMessage(_message.Message):
    __slots__ = ("sender_id", "message_id", "channel_id", "lamport_timestamp", "causal_history", "bloom_filter", "repair_request", "content")
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    LAMPORT_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CAUSAL_HISTORY_FIELD_NUMBER: _ClassVar[int]
    BLOOM_FILTER_FIELD_NUMBER: _ClassVar[int]
    REPAIR_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    sender_id: str
    message_id: str
    channel_id: str
    lamport_timestamp: int
    causal_history: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    bloom_filter: bytes
    repair_request: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    content: bytes
    def __init__(self, sender_id: _Optional[str] = ..., message_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., lamport_timestamp: _Optional[int] = ..., causal_history: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., bloom_filter: _Optional[bytes] = ..., repair_request: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., content: _Optional[bytes] = ...) -> None: ...
