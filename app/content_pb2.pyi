from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TYPE_UNSPECIFIED: _ClassVar[Type]
    TYPE_TEXT: _ClassVar[Type]
    TYPE_ACTION: _ClassVar[Type]
    TYPE_REPLY: _ClassVar[Type]
    TYPE_REACTION: _ClassVar[Type]
    TYPE_EDIT: _ClassVar[Type]
    TYPE_DELETE: _ClassVar[Type]
    TYPE_TOPIC: _ClassVar[Type]
    TYPE_NICK: _ClassVar[Type]
    TYPE_MEMBERSHIP: _ClassVar[Type]
    TYPE_FILE_MANIFEST: _ClassVar[Type]
    TYPE_FILE_SEGMENT: _ClassVar[Type]
TYPE_UNSPECIFIED: Type
TYPE_TEXT: Type
TYPE_ACTION: Type
TYPE_REPLY: Type
TYPE_REACTION: Type
TYPE_EDIT: Type
TYPE_DELETE: Type
TYPE_TOPIC: Type
TYPE_NICK: Type
TYPE_MEMBERSHIP: Type
TYPE_FILE_MANIFEST: Type
TYPE_FILE_SEGMENT: Type

class Content(_message.Message):
    __slots__ = ("version", "type", "name", "text", "action", "reply", "reaction", "edit", "delete", "topic", "nick", "membership", "file_manifest", "file_segment")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    REACTION_FIELD_NUMBER: _ClassVar[int]
    EDIT_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    NICK_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    FILE_MANIFEST_FIELD_NUMBER: _ClassVar[int]
    FILE_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    version: int
    type: int
    name: str
    text: Text
    action: Text
    reply: Reply
    reaction: Reaction
    edit: Edit
    delete: Delete
    topic: Topic
    nick: NickChange
    membership: Membership
    file_manifest: FileManifest
    file_segment: FileSegment
    def __init__(self, version: _Optional[int] = ..., type: _Optional[int] = ..., name: _Optional[str] = ..., text: _Optional[_Union[Text, _Mapping]] = ..., action: _Optional[_Union[Text, _Mapping]] = ..., reply: _Optional[_Union[Reply, _Mapping]] = ..., reaction: _Optional[_Union[Reaction, _Mapping]] = ..., edit: _Optional[_Union[Edit, _Mapping]] = ..., delete: _Optional[_Union[Delete, _Mapping]] = ..., topic: _Optional[_Union[Topic, _Mapping]] = ..., nick: _Optional[_Union[NickChange, _Mapping]] = ..., membership: _Optional[_Union[Membership, _Mapping]] = ..., file_manifest: _Optional[_Union[FileManifest, _Mapping]] = ..., file_segment: _Optional[_Union[FileSegment, _Mapping]] = ...) -> None: ...

class Text(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class Reply(_message.Message):
    __slots__ = ("target_id", "quote", "text")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    quote: str
    text: str
    def __init__(self, target_id: _Optional[str] = ..., quote: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Reaction(_message.Message):
    __slots__ = ("target_id", "emoji", "remove")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    emoji: str
    remove: bool
    def __init__(self, target_id: _Optional[str] = ..., emoji: _Optional[str] = ..., remove: _Optional[bool] = ...) -> None: ...

class Edit(_message.Message):
    __slots__ = ("target_id", "text")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    text: str
    def __init__(self, target_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Delete(_message.Message):
    __slots__ = ("target_id",)
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    def __init__(self, target_id: _Optional[str] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class NickChange(_message.Message):
    __slots__ = ("old_name", "new_name")
    OLD_NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    old_name: str
    new_name: str
    def __init__(self, old_name: _Optional[str] = ..., new_name: _Optional[str] = ...) -> None: ...

class Membership(_message.Message):
    __slots__ = ("change",)
    class Change(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        JOINED: _ClassVar[Membership.Change]
        LEFT: _ClassVar[Membership.Change]
    JOINED: Membership.Change
    LEFT: Membership.Change
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: Membership.Change
    def __init__(self, change: _Optional[_Union[Membership.Change, str]] = ...) -> None: ...

class FileManifest(_message.Message):
    __slots__ = ("file_id", "name", "size", "sha256", "segment_count", "segment_size")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_SIZE_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    name: str
    size: int
    sha256: bytes
    segment_count: int
    segment_size: int
    def __init__(self, file_id: _Optional[str] = ..., name: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[bytes] = ..., segment_count: _Optional[int] = ..., segment_size: _Optional[int] = ...) -> None: ...

class FileSegment(_message.Message):
    __slots__ = ("file_id", "index", "data")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    index: int
    data: bytes
    def __init__(self, file_id: _Optional[str] = ..., index: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
