# The types of the folded CRC-32C (wire/_crc32c.c), which mypy cannot read from the extension itself.
from typing_extensions import Buffer

FAST: int

def crc32c(data: Buffer, value: int = 0, /) -> int: ...
