from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SignedEntry(_message.Message):
    __slots__ = ("body", "signature", "device_signature")
    BODY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    signature: bytes
    device_signature: bytes
    def __init__(self, body: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., device_signature: _Optional[bytes] = ...) -> None: ...

class Entry(_message.Message):
    __slots__ = ("root", "signer", "parents", "genesis", "add", "revoke")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    SIGNER_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    GENESIS_FIELD_NUMBER: _ClassVar[int]
    ADD_FIELD_NUMBER: _ClassVar[int]
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    root: bytes
    signer: bytes
    parents: _containers.RepeatedScalarFieldContainer[bytes]
    genesis: Genesis
    add: AddDevice
    revoke: RevokeDevice
    def __init__(self, root: _Optional[bytes] = ..., signer: _Optional[bytes] = ..., parents: _Optional[_Iterable[bytes]] = ..., genesis: _Optional[_Union[Genesis, _Mapping]] = ..., add: _Optional[_Union[AddDevice, _Mapping]] = ..., revoke: _Optional[_Union[RevokeDevice, _Mapping]] = ...) -> None: ...

class Genesis(_message.Message):
    __slots__ = ("recovery", "device_name")
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    DEVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    recovery: bytes
    device_name: str
    def __init__(self, recovery: _Optional[bytes] = ..., device_name: _Optional[str] = ...) -> None: ...

class AddDevice(_message.Message):
    __slots__ = ("device", "name", "share_key")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEY_FIELD_NUMBER: _ClassVar[int]
    device: bytes
    name: str
    share_key: bytes
    def __init__(self, device: _Optional[bytes] = ..., name: _Optional[str] = ..., share_key: _Optional[bytes] = ...) -> None: ...

class RevokeDevice(_message.Message):
    __slots__ = ("device",)
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    device: bytes
    def __init__(self, device: _Optional[bytes] = ...) -> None: ...

class DeviceLog(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[SignedEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[SignedEntry, _Mapping]]] = ...) -> None: ...
