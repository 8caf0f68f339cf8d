from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Hello(_message.Message):
    __slots__ = ("protocol_version", "node_id", "role")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    node_id: bytes
    role: str
    def __init__(self, protocol_version: _Optional[int] = ..., node_id: _Optional[bytes] = ..., role: _Optional[str] = ...) -> None: ...

class Subscribe(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, topics: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Unsubscribe(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, topics: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Gossip(_message.Message):
    __slots__ = ("envelope", "hops_left")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    HOPS_LEFT_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    hops_left: int
    def __init__(self, envelope: _Optional[bytes] = ..., hops_left: _Optional[int] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class GossipFrame(_message.Message):
    __slots__ = ("version", "hello", "subscribe", "unsubscribe", "gossip", "error")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    GOSSIP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    version: int
    hello: Hello
    subscribe: Subscribe
    unsubscribe: Unsubscribe
    gossip: Gossip
    error: Error
    def __init__(self, version: _Optional[int] = ..., hello: _Optional[_Union[Hello, _Mapping]] = ..., subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., unsubscribe: _Optional[_Union[Unsubscribe, _Mapping]] = ..., gossip: _Optional[_Union[Gossip, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...
