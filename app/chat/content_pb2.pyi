from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TYPE_UNSPECIFIED: _ClassVar[Type]
    TYPE_FILE_MANIFEST: _ClassVar[Type]
    TYPE_FILE_SEGMENT: _ClassVar[Type]
TYPE_UNSPECIFIED: Type
TYPE_FILE_MANIFEST: Type
TYPE_FILE_SEGMENT: Type

class Content(_message.Message):
    __slots__ = ("version", "type", "name", "file_manifest", "file_segment")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FILE_MANIFEST_FIELD_NUMBER: _ClassVar[int]
    FILE_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    version: int
    type: int
    name: str
    file_manifest: FileManifest
    file_segment: FileSegment
    def __init__(self, version: _Optional[int] = ..., type: _Optional[int] = ..., name: _Optional[str] = ..., file_manifest: _Optional[_Union[FileManifest, _Mapping]] = ..., file_segment: _Optional[_Union[FileSegment, _Mapping]] = ...) -> None: ...

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
