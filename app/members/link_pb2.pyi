from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LinkFrame(_message.Message):
    __slots__ = ("version", "role", "pake", "confirm", "sealed", "abort")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PAKE_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    version: int
    role: int
    pake: bytes
    confirm: bytes
    sealed: Sealed
    abort: str
    def __init__(self, version: _Optional[int] = ..., role: _Optional[int] = ..., pake: _Optional[bytes] = ..., confirm: _Optional[bytes] = ..., sealed: _Optional[_Union[Sealed, _Mapping]] = ..., abort: _Optional[str] = ...) -> None: ...

class Sealed(_message.Message):
    __slots__ = ("counter", "box")
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    counter: int
    box: bytes
    def __init__(self, counter: _Optional[int] = ..., box: _Optional[bytes] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("offer", "device", "handover", "done")
    OFFER_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    HANDOVER_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    offer: Offer
    device: Device
    handover: Handover
    done: Done
    def __init__(self, offer: _Optional[_Union[Offer, _Mapping]] = ..., device: _Optional[_Union[Device, _Mapping]] = ..., handover: _Optional[_Union[Handover, _Mapping]] = ..., done: _Optional[_Union[Done, _Mapping]] = ...) -> None: ...

class Offer(_message.Message):
    __slots__ = ("root", "device_log")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_LOG_FIELD_NUMBER: _ClassVar[int]
    root: bytes
    device_log: bytes
    def __init__(self, root: _Optional[bytes] = ..., device_log: _Optional[bytes] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("device", "pop", "name", "share_key")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    POP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEY_FIELD_NUMBER: _ClassVar[int]
    device: bytes
    pop: bytes
    name: str
    share_key: bytes
    def __init__(self, device: _Optional[bytes] = ..., pop: _Optional[bytes] = ..., name: _Optional[str] = ..., share_key: _Optional[bytes] = ...) -> None: ...

class Handover(_message.Message):
    __slots__ = ("add", "payload")
    ADD_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    add: bytes
    payload: bytes
    def __init__(self, add: _Optional[bytes] = ..., payload: _Optional[bytes] = ...) -> None: ...

class Done(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
