from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Envelope(_message.Message):
    __slots__ = ("version", "topic", "nonce", "ciphertext")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    version: int
    topic: bytes
    nonce: bytes
    ciphertext: bytes
    def __init__(self, version: _Optional[int] = ..., topic: _Optional[bytes] = ..., nonce: _Optional[bytes] = ..., ciphertext: _Optional[bytes] = ...) -> None: ...

class SealedPayload(_message.Message):
    __slots__ = ("sds", "sender_public_key", "signature", "carried")
    SDS_FIELD_NUMBER: _ClassVar[int]
    SENDER_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    CARRIED_FIELD_NUMBER: _ClassVar[int]
    sds: bytes
    sender_public_key: bytes
    signature: bytes
    carried: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, sds: _Optional[bytes] = ..., sender_public_key: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., carried: _Optional[_Iterable[bytes]] = ...) -> None: ...

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

class Publish(_message.Message):
    __slots__ = ("envelope",)
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    def __init__(self, envelope: _Optional[bytes] = ...) -> None: ...

class Deliver(_message.Message):
    __slots__ = ("envelope",)
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    def __init__(self, envelope: _Optional[bytes] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class RelayFrame(_message.Message):
    __slots__ = ("version", "subscribe", "unsubscribe", "publish", "deliver", "error", "ping", "pong")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_FIELD_NUMBER: _ClassVar[int]
    DELIVER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    version: int
    subscribe: Subscribe
    unsubscribe: Unsubscribe
    publish: Publish
    deliver: Deliver
    error: Error
    ping: Ping
    pong: Pong
    def __init__(self, version: _Optional[int] = ..., subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., unsubscribe: _Optional[_Union[Unsubscribe, _Mapping]] = ..., publish: _Optional[_Union[Publish, _Mapping]] = ..., deliver: _Optional[_Union[Deliver, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ..., pong: _Optional[_Union[Pong, _Mapping]] = ...) -> None: ...
