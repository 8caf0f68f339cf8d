from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Cursor(_message.Message):
    __slots__ = ("arrival_ms", "hash")
    ARRIVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    arrival_ms: int
    hash: bytes
    def __init__(self, arrival_ms: _Optional[int] = ..., hash: _Optional[bytes] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Info(_message.Message):
    __slots__ = ("protocol_version", "store_time_ms", "max_hashes", "max_page_size", "default_page_size", "max_request_bytes", "oldest_arrival_ms", "proven_topics", "proven_key_ids", "archive_id", "engine")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_HASHES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    OLDEST_ARRIVAL_MS_FIELD_NUMBER: _ClassVar[int]
    PROVEN_TOPICS_FIELD_NUMBER: _ClassVar[int]
    PROVEN_KEY_IDS_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_ID_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    store_time_ms: int
    max_hashes: int
    max_page_size: int
    default_page_size: int
    max_request_bytes: int
    oldest_arrival_ms: int
    proven_topics: _containers.RepeatedScalarFieldContainer[bytes]
    proven_key_ids: _containers.RepeatedScalarFieldContainer[bytes]
    archive_id: bytes
    engine: str
    def __init__(self, protocol_version: _Optional[int] = ..., store_time_ms: _Optional[int] = ..., max_hashes: _Optional[int] = ..., max_page_size: _Optional[int] = ..., default_page_size: _Optional[int] = ..., max_request_bytes: _Optional[int] = ..., oldest_arrival_ms: _Optional[int] = ..., proven_topics: _Optional[_Iterable[bytes]] = ..., proven_key_ids: _Optional[_Iterable[bytes]] = ..., archive_id: _Optional[bytes] = ..., engine: _Optional[str] = ...) -> None: ...

class Put(_message.Message):
    __slots__ = ("envelopes",)
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    envelopes: _containers.RepeatedCompositeFieldContainer[ProvenEnvelope]
    def __init__(self, envelopes: _Optional[_Iterable[_Union[ProvenEnvelope, _Mapping]]] = ...) -> None: ...

class ProvenEnvelope(_message.Message):
    __slots__ = ("envelope", "proof")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    proof: bytes
    def __init__(self, envelope: _Optional[bytes] = ..., proof: _Optional[bytes] = ...) -> None: ...

class PutResult(_message.Message):
    __slots__ = ("accepted", "refused")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    refused: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted: _Optional[int] = ..., refused: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryByHash(_message.Message):
    __slots__ = ("hashes",)
    HASHES_FIELD_NUMBER: _ClassVar[int]
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, hashes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class QueryByTime(_message.Message):
    __slots__ = ("topic", "since_ms", "until_ms", "cursor", "page_size", "want_total")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    WANT_TOTAL_FIELD_NUMBER: _ClassVar[int]
    topic: bytes
    since_ms: int
    until_ms: int
    cursor: Cursor
    page_size: int
    want_total: bool
    def __init__(self, topic: _Optional[bytes] = ..., since_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., cursor: _Optional[_Union[Cursor, _Mapping]] = ..., page_size: _Optional[int] = ..., want_total: _Optional[bool] = ...) -> None: ...

class StoredEnvelope(_message.Message):
    __slots__ = ("envelope", "arrival_ms")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_MS_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    arrival_ms: int
    def __init__(self, envelope: _Optional[bytes] = ..., arrival_ms: _Optional[int] = ...) -> None: ...

class Envelopes(_message.Message):
    __slots__ = ("envelopes", "final", "next", "store_time_ms", "total")
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    STORE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    envelopes: _containers.RepeatedCompositeFieldContainer[StoredEnvelope]
    final: bool
    next: Cursor
    store_time_ms: int
    total: int
    def __init__(self, envelopes: _Optional[_Iterable[_Union[StoredEnvelope, _Mapping]]] = ..., final: _Optional[bool] = ..., next: _Optional[_Union[Cursor, _Mapping]] = ..., store_time_ms: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class StoreFrame(_message.Message):
    __slots__ = ("version", "request_id", "info_request", "info", "query_by_hash", "query_by_time", "envelopes", "error", "put", "put_result")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    INFO_REQUEST_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    QUERY_BY_HASH_FIELD_NUMBER: _ClassVar[int]
    QUERY_BY_TIME_FIELD_NUMBER: _ClassVar[int]
    ENVELOPES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    PUT_RESULT_FIELD_NUMBER: _ClassVar[int]
    version: int
    request_id: int
    info_request: InfoRequest
    info: Info
    query_by_hash: QueryByHash
    query_by_time: QueryByTime
    envelopes: Envelopes
    error: Error
    put: Put
    put_result: PutResult
    def __init__(self, version: _Optional[int] = ..., request_id: _Optional[int] = ..., info_request: _Optional[_Union[InfoRequest, _Mapping]] = ..., info: _Optional[_Union[Info, _Mapping]] = ..., query_by_hash: _Optional[_Union[QueryByHash, _Mapping]] = ..., query_by_time: _Optional[_Union[QueryByTime, _Mapping]] = ..., envelopes: _Optional[_Union[Envelopes, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., put: _Optional[_Union[Put, _Mapping]] = ..., put_result: _Optional[_Union[PutResult, _Mapping]] = ...) -> None: ...
