from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TypedContent(_message.Message):
    __slots__ = ("version", "name", "reply", "reaction", "edit", "delete")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    REACTION_FIELD_NUMBER: _ClassVar[int]
    EDIT_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    version: int
    name: str
    reply: Reply
    reaction: Reaction
    edit: Edit
    delete: Delete
    def __init__(self, version: _Optional[int] = ..., name: _Optional[str] = ..., reply: _Optional[_Union[Reply, _Mapping]] = ..., reaction: _Optional[_Union[Reaction, _Mapping]] = ..., edit: _Optional[_Union[Edit, _Mapping]] = ..., delete: _Optional[_Union[Delete, _Mapping]] = ...) -> None: ...

class Reply(_message.Message):
    __slots__ = ("target", "text")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    target: str
    text: str
    def __init__(self, target: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Reaction(_message.Message):
    __slots__ = ("target", "emoji", "remove")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    target: str
    emoji: str
    remove: bool
    def __init__(self, target: _Optional[str] = ..., emoji: _Optional[str] = ..., remove: _Optional[bool] = ...) -> None: ...

class Edit(_message.Message):
    __slots__ = ("target", "text")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    target: str
    text: str
    def __init__(self, target: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Delete(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: str
    def __init__(self, target: _Optional[str] = ...) -> None: ...
