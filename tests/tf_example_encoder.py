"""A minimal writer of See et al.'s chunk format, written independently of the reader under test
(data_scripts/read_see_chunks.py): tf.train.Example protobufs with bytes features, framed as
8-byte little-endian length + body. Used by tests/test_cnndm_see_data.py and the fuzzed inputs of
tests/reliability/reliability_fuzz.py."""
import lzma
import struct
from pathlib import Path
from typing import Sequence


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of n >= 0."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def length_delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def example(int_feature: bool = True, **features) -> bytes:
    """A serialised tf.train.Example with bytes features (a str value or a list of str values);
    with ``int_feature`` an int64 feature ``n`` = 7 beside them, which a reader must skip."""
    ld = length_delimited
    entries = b""
    for key, values in features.items():
        values = [values] if isinstance(values, str) else values
        bytes_list = b"".join(ld(1, v.encode("utf-8")) for v in values)
        entries += ld(1, ld(1, key.encode("utf-8")) + ld(2, ld(1, bytes_list)))
    if int_feature:  # Feature.int64_list = 3 holding varint 7
        entries += ld(1, ld(1, b"n") + ld(2, ld(3, varint(1 << 3 | 0) + varint(7))))
    return ld(1, entries)


def frame(records: Sequence[bytes]) -> bytes:
    """Records as a chunk file's bytes: each an 8-byte little-endian length and the body."""
    return b"".join(struct.pack("<q", len(r)) + r for r in records)


def write_chunk(path: Path, records: Sequence[bytes], compress: bool = False) -> None:
    """Write a chunk file (``path`` + ``.xz`` with ``compress``)."""
    data = frame(records)
    if compress:
        with lzma.open(str(path) + ".xz", "wb") as f:
            f.write(data)
    else:
        Path(path).write_bytes(data)
