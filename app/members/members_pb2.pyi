from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_MEMBER: _ClassVar[Role]
    ROLE_ADMIN: _ClassVar[Role]
ROLE_UNSPECIFIED: Role
ROLE_MEMBER: Role
ROLE_ADMIN: Role

class Member(_message.Message):
    __slots__ = ("identity_key", "share_key", "name")
    IDENTITY_KEY_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    identity_key: bytes
    share_key: bytes
    name: str
    def __init__(self, identity_key: _Optional[bytes] = ..., share_key: _Optional[bytes] = ..., name: _Optional[str] = ...) -> None: ...

class Create(_message.Message):
    __slots__ = ("channel", "channel_id", "creator", "nonce")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    channel: str
    channel_id: bytes
    creator: Member
    nonce: bytes
    def __init__(self, channel: _Optional[str] = ..., channel_id: _Optional[bytes] = ..., creator: _Optional[_Union[Member, _Mapping]] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class Add(_message.Message):
    __slots__ = ("member", "invite_id", "role")
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    INVITE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    member: Member
    invite_id: bytes
    role: Role
    def __init__(self, member: _Optional[_Union[Member, _Mapping]] = ..., invite_id: _Optional[bytes] = ..., role: _Optional[_Union[Role, str]] = ...) -> None: ...

class Remove(_message.Message):
    __slots__ = ("member_id", "epoch_keys", "epoch_nonce", "epoch_parts", "cut")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_NONCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_PARTS_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    epoch_keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    epoch_nonce: bytes
    epoch_parts: int
    cut: Cut
    def __init__(self, member_id: _Optional[str] = ..., epoch_keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ..., epoch_nonce: _Optional[bytes] = ..., epoch_parts: _Optional[int] = ..., cut: _Optional[_Union[Cut, _Mapping]] = ...) -> None: ...

class Leave(_message.Message):
    __slots__ = ("epoch_keys", "epoch_nonce", "epoch_parts", "cut")
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_NONCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_PARTS_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    epoch_keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    epoch_nonce: bytes
    epoch_parts: int
    cut: Cut
    def __init__(self, epoch_keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ..., epoch_nonce: _Optional[bytes] = ..., epoch_parts: _Optional[int] = ..., cut: _Optional[_Union[Cut, _Mapping]] = ...) -> None: ...

class Rename(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class AddDevice(_message.Message):
    __slots__ = ("device", "root", "pop")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    POP_FIELD_NUMBER: _ClassVar[int]
    device: Member
    root: bytes
    pop: bytes
    def __init__(self, device: _Optional[_Union[Member, _Mapping]] = ..., root: _Optional[bytes] = ..., pop: _Optional[bytes] = ...) -> None: ...

class Cut(_message.Message):
    __slots__ = ("count", "digest", "ids", "parts_nonce", "parts")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    PARTS_NONCE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    count: int
    digest: bytes
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    parts_nonce: bytes
    parts: int
    def __init__(self, count: _Optional[int] = ..., digest: _Optional[bytes] = ..., ids: _Optional[_Iterable[bytes]] = ..., parts_nonce: _Optional[bytes] = ..., parts: _Optional[int] = ...) -> None: ...

class RosterEntry(_message.Message):
    __slots__ = ("member", "role")
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    member: Member
    role: Role
    def __init__(self, member: _Optional[_Union[Member, _Mapping]] = ..., role: _Optional[_Union[Role, str]] = ...) -> None: ...

class Genesis(_message.Message):
    __slots__ = ("create", "members", "invites_used", "members_nonce", "members_parts", "members_count", "epoch_keys", "epoch_nonce", "epoch_parts")
    CREATE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    INVITES_USED_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_NONCE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_PARTS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_COUNT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_NONCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_PARTS_FIELD_NUMBER: _ClassVar[int]
    create: Create
    members: _containers.RepeatedCompositeFieldContainer[RosterEntry]
    invites_used: _containers.RepeatedScalarFieldContainer[bytes]
    members_nonce: bytes
    members_parts: int
    members_count: int
    epoch_keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    epoch_nonce: bytes
    epoch_parts: int
    def __init__(self, create: _Optional[_Union[Create, _Mapping]] = ..., members: _Optional[_Iterable[_Union[RosterEntry, _Mapping]]] = ..., invites_used: _Optional[_Iterable[bytes]] = ..., members_nonce: _Optional[bytes] = ..., members_parts: _Optional[int] = ..., members_count: _Optional[int] = ..., epoch_keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ..., epoch_nonce: _Optional[bytes] = ..., epoch_parts: _Optional[int] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("nonce", "ids", "members")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    members: _containers.RepeatedCompositeFieldContainer[RosterEntry]
    def __init__(self, nonce: _Optional[bytes] = ..., ids: _Optional[_Iterable[bytes]] = ..., members: _Optional[_Iterable[_Union[RosterEntry, _Mapping]]] = ...) -> None: ...

class SignedEvent(_message.Message):
    __slots__ = ("body", "signature")
    BODY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    signature: bytes
    def __init__(self, body: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class Chained(_message.Message):
    __slots__ = ("channel_id", "author_key", "parents", "create", "genesis", "add", "remove", "leave", "set_role", "rekey", "share_key", "rename", "add_device", "part")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_KEY_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    GENESIS_FIELD_NUMBER: _ClassVar[int]
    ADD_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    LEAVE_FIELD_NUMBER: _ClassVar[int]
    SET_ROLE_FIELD_NUMBER: _ClassVar[int]
    REKEY_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEY_FIELD_NUMBER: _ClassVar[int]
    RENAME_FIELD_NUMBER: _ClassVar[int]
    ADD_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    channel_id: bytes
    author_key: bytes
    parents: _containers.RepeatedScalarFieldContainer[bytes]
    create: Create
    genesis: Genesis
    add: Add
    remove: Remove
    leave: Leave
    set_role: SetRole
    rekey: Rekey
    share_key: ShareKey
    rename: Rename
    add_device: AddDevice
    part: Part
    def __init__(self, channel_id: _Optional[bytes] = ..., author_key: _Optional[bytes] = ..., parents: _Optional[_Iterable[bytes]] = ..., create: _Optional[_Union[Create, _Mapping]] = ..., genesis: _Optional[_Union[Genesis, _Mapping]] = ..., add: _Optional[_Union[Add, _Mapping]] = ..., remove: _Optional[_Union[Remove, _Mapping]] = ..., leave: _Optional[_Union[Leave, _Mapping]] = ..., set_role: _Optional[_Union[SetRole, _Mapping]] = ..., rekey: _Optional[_Union[Rekey, _Mapping]] = ..., share_key: _Optional[_Union[ShareKey, _Mapping]] = ..., rename: _Optional[_Union[Rename, _Mapping]] = ..., add_device: _Optional[_Union[AddDevice, _Mapping]] = ..., part: _Optional[_Union[Part, _Mapping]] = ...) -> None: ...

class StateDigest(_message.Message):
    __slots__ = ("heads", "state", "events")
    HEADS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    heads: _containers.RepeatedScalarFieldContainer[bytes]
    state: bytes
    events: int
    def __init__(self, heads: _Optional[_Iterable[bytes]] = ..., state: _Optional[bytes] = ..., events: _Optional[int] = ...) -> None: ...

class Rekey(_message.Message):
    __slots__ = ("epoch_keys", "epoch_nonce", "epoch_parts")
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_NONCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_PARTS_FIELD_NUMBER: _ClassVar[int]
    epoch_keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    epoch_nonce: bytes
    epoch_parts: int
    def __init__(self, epoch_keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ..., epoch_nonce: _Optional[bytes] = ..., epoch_parts: _Optional[int] = ...) -> None: ...

class EpochKeys(_message.Message):
    __slots__ = ("epoch_nonce", "epoch_keys")
    EPOCH_NONCE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    epoch_nonce: bytes
    epoch_keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    def __init__(self, epoch_nonce: _Optional[bytes] = ..., epoch_keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ...) -> None: ...

class EpochKey(_message.Message):
    __slots__ = ("channel_id", "key")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    channel_id: bytes
    key: bytes
    def __init__(self, channel_id: _Optional[bytes] = ..., key: _Optional[bytes] = ...) -> None: ...

class SetRole(_message.Message):
    __slots__ = ("member_id", "role")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    role: Role
    def __init__(self, member_id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ...) -> None: ...

class ShareKey(_message.Message):
    __slots__ = ("share_key",)
    SHARE_KEY_FIELD_NUMBER: _ClassVar[int]
    share_key: bytes
    def __init__(self, share_key: _Optional[bytes] = ...) -> None: ...

class KeyShare(_message.Message):
    __slots__ = ("session_id", "first_index", "keys")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    first_index: int
    keys: _containers.RepeatedCompositeFieldContainer[SealedKey]
    def __init__(self, session_id: _Optional[str] = ..., first_index: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[SealedKey, _Mapping]]] = ...) -> None: ...

class SealedKey(_message.Message):
    __slots__ = ("recipient_id", "sealed")
    RECIPIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    recipient_id: str
    sealed: bytes
    def __init__(self, recipient_id: _Optional[str] = ..., sealed: _Optional[bytes] = ...) -> None: ...

class SessionKeyPlain(_message.Message):
    __slots__ = ("channel_id", "sender_id", "session_id", "session_key", "exported")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_FIELD_NUMBER: _ClassVar[int]
    channel_id: bytes
    sender_id: str
    session_id: str
    session_key: bytes
    exported: bool
    def __init__(self, channel_id: _Optional[bytes] = ..., sender_id: _Optional[str] = ..., session_id: _Optional[str] = ..., session_key: _Optional[bytes] = ..., exported: _Optional[bool] = ...) -> None: ...

class Encrypted(_message.Message):
    __slots__ = ("session_id", "megolm", "span")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MEGOLM_FIELD_NUMBER: _ClassVar[int]
    SPAN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    megolm: bytes
    span: bytes
    def __init__(self, session_id: _Optional[str] = ..., megolm: _Optional[bytes] = ..., span: _Optional[bytes] = ...) -> None: ...

class DirectInvite(_message.Message):
    __slots__ = ("recipient_id", "sealed")
    RECIPIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    recipient_id: str
    sealed: bytes
    def __init__(self, recipient_id: _Optional[str] = ..., sealed: _Optional[bytes] = ...) -> None: ...

class DirectChannel(_message.Message):
    __slots__ = ("channel", "channel_id", "epoch_keys", "controls")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    CONTROLS_FIELD_NUMBER: _ClassVar[int]
    channel: str
    channel_id: bytes
    epoch_keys: _containers.RepeatedScalarFieldContainer[bytes]
    controls: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, channel: _Optional[str] = ..., channel_id: _Optional[bytes] = ..., epoch_keys: _Optional[_Iterable[bytes]] = ..., controls: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Control(_message.Message):
    __slots__ = ("version", "create", "add", "remove", "set_role", "share_key", "key_share", "rekey", "direct_invite", "epoch_keys", "signed", "digest", "span")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_FIELD_NUMBER: _ClassVar[int]
    ADD_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    SET_ROLE_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_SHARE_FIELD_NUMBER: _ClassVar[int]
    REKEY_FIELD_NUMBER: _ClassVar[int]
    DIRECT_INVITE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_KEYS_FIELD_NUMBER: _ClassVar[int]
    SIGNED_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SPAN_FIELD_NUMBER: _ClassVar[int]
    version: int
    create: Create
    add: Add
    remove: Remove
    set_role: SetRole
    share_key: ShareKey
    key_share: KeyShare
    rekey: Rekey
    direct_invite: DirectInvite
    epoch_keys: EpochKeys
    signed: SignedEvent
    digest: StateDigest
    span: bytes
    def __init__(self, version: _Optional[int] = ..., create: _Optional[_Union[Create, _Mapping]] = ..., add: _Optional[_Union[Add, _Mapping]] = ..., remove: _Optional[_Union[Remove, _Mapping]] = ..., set_role: _Optional[_Union[SetRole, _Mapping]] = ..., share_key: _Optional[_Union[ShareKey, _Mapping]] = ..., key_share: _Optional[_Union[KeyShare, _Mapping]] = ..., rekey: _Optional[_Union[Rekey, _Mapping]] = ..., direct_invite: _Optional[_Union[DirectInvite, _Mapping]] = ..., epoch_keys: _Optional[_Union[EpochKeys, _Mapping]] = ..., signed: _Optional[_Union[SignedEvent, _Mapping]] = ..., digest: _Optional[_Union[StateDigest, _Mapping]] = ..., span: _Optional[bytes] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("content", "lamport", "message_id", "envelope")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    LAMPORT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    content: bytes
    lamport: int
    message_id: str
    envelope: bytes
    def __init__(self, content: _Optional[bytes] = ..., lamport: _Optional[int] = ..., message_id: _Optional[str] = ..., envelope: _Optional[bytes] = ...) -> None: ...
