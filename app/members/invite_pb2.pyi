from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InviteHeader(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class Invite(_message.Message):
    __slots__ = ("version", "relays", "channel", "channel_id", "secret", "expires_ms")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RELAYS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    version: int
    relays: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    channel_id: bytes
    secret: bytes
    expires_ms: int
    def __init__(self, version: _Optional[int] = ..., relays: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., channel_id: _Optional[bytes] = ..., secret: _Optional[bytes] = ..., expires_ms: _Optional[int] = ...) -> None: ...

class Box(_message.Message):
    __slots__ = ("version", "kind", "nonce", "ciphertext")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[Box.Kind]
        JOIN_REQUEST: _ClassVar[Box.Kind]
        JOIN_ANSWER: _ClassVar[Box.Kind]
    KIND_UNSPECIFIED: Box.Kind
    JOIN_REQUEST: Box.Kind
    JOIN_ANSWER: Box.Kind
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    version: int
    kind: Box.Kind
    nonce: bytes
    ciphertext: bytes
    def __init__(self, version: _Optional[int] = ..., kind: _Optional[_Union[Box.Kind, str]] = ..., nonce: _Optional[bytes] = ..., ciphertext: _Optional[bytes] = ...) -> None: ...

class Signed(_message.Message):
    __slots__ = ("body", "signature")
    BODY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    signature: bytes
    def __init__(self, body: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ("version", "invite_id", "identity_key", "x25519_key", "name", "sent_ms", "history_from")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INVITE_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_KEY_FIELD_NUMBER: _ClassVar[int]
    X25519_KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SENT_MS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FROM_FIELD_NUMBER: _ClassVar[int]
    version: int
    invite_id: bytes
    identity_key: bytes
    x25519_key: bytes
    name: str
    sent_ms: int
    history_from: int
    def __init__(self, version: _Optional[int] = ..., invite_id: _Optional[bytes] = ..., identity_key: _Optional[bytes] = ..., x25519_key: _Optional[bytes] = ..., name: _Optional[str] = ..., sent_ms: _Optional[int] = ..., history_from: _Optional[int] = ...) -> None: ...

class JoinAnswer(_message.Message):
    __slots__ = ("version", "invite_id", "newcomer_key", "request_digest", "admin_key", "sent_ms", "accepted", "refused")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INVITE_ID_FIELD_NUMBER: _ClassVar[int]
    NEWCOMER_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_DIGEST_FIELD_NUMBER: _ClassVar[int]
    ADMIN_KEY_FIELD_NUMBER: _ClassVar[int]
    SENT_MS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    version: int
    invite_id: bytes
    newcomer_key: bytes
    request_digest: bytes
    admin_key: bytes
    sent_ms: int
    accepted: Accepted
    refused: Refused
    def __init__(self, version: _Optional[int] = ..., invite_id: _Optional[bytes] = ..., newcomer_key: _Optional[bytes] = ..., request_digest: _Optional[bytes] = ..., admin_key: _Optional[bytes] = ..., sent_ms: _Optional[int] = ..., accepted: _Optional[_Union[Accepted, _Mapping]] = ..., refused: _Optional[_Union[Refused, _Mapping]] = ...) -> None: ...

class Accepted(_message.Message):
    __slots__ = ("channel", "channel_key", "channel_id", "relays", "epoch_keys", "controls", "history_from", "history_total")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_KEY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    RELAYS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    CONTROLS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FROM_FIELD_NUMBER: _ClassVar[int]
    HISTORY_TOTAL_FIELD_NUMBER: _ClassVar[int]
    channel: str
    channel_key: bytes
    channel_id: bytes
    relays: _containers.RepeatedScalarFieldContainer[str]
    epoch_keys: _containers.RepeatedScalarFieldContainer[bytes]
    controls: _containers.RepeatedScalarFieldContainer[bytes]
    history_from: int
    history_total: int
    def __init__(self, channel: _Optional[str] = ..., channel_key: _Optional[bytes] = ..., channel_id: _Optional[bytes] = ..., relays: _Optional[_Iterable[str]] = ..., epoch_keys: _Optional[_Iterable[bytes]] = ..., controls: _Optional[_Iterable[bytes]] = ..., history_from: _Optional[int] = ..., history_total: _Optional[int] = ...) -> None: ...

class Refused(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...
