# The types of the C codec (wire/_speedups.c), which mypy cannot read from the extension itself.
from collections.abc import Callable

from typing_extensions import Buffer

from .codec import Message

OPCODES: dict[str, int]
INTERFACE: int

class Layout:
    """One struct's compiled field program at one version."""

class MessageCodec:
    def __init__(self, name: str, lowest_version: int, layouts: tuple[Layout, ...], /) -> None: ...
    def decode(self, buf: Buffer, version: int, pos: int = 0) -> Message: ...
    def decode_from(self, buf: Buffer, version: int, pos: int = 0) -> tuple[Message, int]: ...

def configure(codec_error: type[Exception], unsupported_version_error: type[Exception], uuid_type: type,
              unknown_safety: object, frame_buffer: type[bytearray], struct_type: type, reference_min: int,
              /) -> None: ...
def compile(programs: dict[str, tuple[object, ...]], /) -> dict[str, Layout]: ...
# Message.encode in C: (self, version, out=None) -> bytearray, as Message._pure_encode.
def encode_method(message_class: type[Message], /) -> Callable[..., bytearray]: ...
