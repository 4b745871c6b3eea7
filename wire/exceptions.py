"""The codec's exceptions: every malformed input surfaces as a CodecError, never a bare
struct.error, IndexError or UnicodeDecodeError, so the server has one thing to catch."""


class CodecError(ValueError):
    """Bytes that do not decode as the message, header or record data they claim to be."""


class UnsupportedVersionError(CodecError):
    """An api key or version this codec does not know, or a value a version cannot carry."""


class CorruptRecordError(CodecError):
    """Record data that fails its structure or checksum (Kafka's CORRUPT_MESSAGE)."""


class DecompressionError(CorruptRecordError):
    """Compressed record data that cannot be inflated, or would inflate past the allowed size."""
