"""A chunk of a curve as bytes, and back, bit for bit: NaN payloads, +-inf, -0.0 included.

A chunk is ``VERSION`` (one byte), then the zstandard frame of: a header (the value encoding,
its decimal exponent, the point count) and two int64 columns, the steps delta-encoded (the
first step, then the gaps: a curve logged every step compresses to almost nothing) and the
values. Values go one of two ways, chosen per chunk:

- ``SCALED``: a curve logged with a few decimals (``2.3456``) is stored as the integers
  ``round(value * 10**d)``, delta-encoded, for the smallest ``d`` for which dividing them by
  ``10**d`` gives back every value's bits (checked here, on the data: never assumed);
- ``FLOAT``: anything else (full precision, non-finite values, -0.0): the IEEE bits as they are.

Both columns are byte-stream split (all first bytes, then all second bytes, ...) before
compression: a float's sign and exponent bytes repeat from point to point and compress well
when they stand together. A later codec gets another version byte; readers keep decoding
this one, so stored chunks never need a rewrite.

Every stored chunk carries a checksum (``checksum``: xxh3-64 of its bytes, seeded with its
curve's place, ``curve_seed``: the curve's id, job, arm and metric, so a chunk moved under
another curve fails, and so do all of a curve's chunks when its row is moved to another run or
its run renamed); ``decode`` turns every damaged input (truncated, unknown version, an
undecodable body) into ``BadChunk``, never other numbers.

The migration that first wrote chunks (``migrations/versions/0007_curve_chunks.py``) keeps
its own copy of version 1, as an old revision never runs today's code; a test checks that
the two agree byte for byte.
"""

from __future__ import annotations

import struct
import threading

import numpy as np
import xxhash
import zstandard

VERSION = 1
FLOAT = 0
SCALED = 1
MAX_DECIMALS = 12
EXACT_INT = 2**53  # below it every integer is exact in a float64, so the division is exact too
HEADER = struct.Struct("<BBI")  # value encoding, decimal exponent, point count
LEVEL = 3  # zstandard's default: higher levels cost ingest time for a few percent of size
# zstandard's (de)compressor objects must not be shared between threads (a use from two at
# once can crash the process; the server decodes in several): one of each per thread.
_own = threading.local()


def _zstd() -> threading.local:
    if not hasattr(_own, "compressor"):
        _own.compressor = zstandard.ZstdCompressor(level=LEVEL)
        _own.decompressor = zstandard.ZstdDecompressor()
    return _own


class BadChunk(ValueError):
    """A chunk that cannot be what its row says: its message is the reason, in a few words."""


def curve_seed(curve_id: int, job: str, arm: str, metric: str) -> int:
    """What a curve's chunk checksums are seeded with: the xxh3-64 of its job, arm and metric
    (NUL-separated: no name holds a control character), seeded with its id."""
    place = "\0".join((job, arm, metric)).encode("utf-8")
    return xxhash.xxh3_64_intdigest(place, seed=curve_id)


def checksum(data: bytes, seed: int) -> int:
    """The chunk's xxh3-64 (seeded by ``curve_seed``) as a signed 64-bit integer (what a
    BIGINT column holds)."""
    return int.from_bytes(xxhash.xxh3_64_digest(data, seed=seed), "big", signed=True)


def _split(column: np.ndarray) -> bytes:
    return column.view(np.uint8).reshape(-1, 8).T.tobytes()


# values from which a plane at a time is faster than one strided copy of them all (whose
# reads jump across the 8 planes for every value: 1.8x slower for a chunk of 16,384)
PLANE_AT_A_TIME = 512


def _join(data: bytes, n: int, into: np.ndarray) -> np.ndarray:
    """``n`` 8-byte values from ``_split``'s byte planes, written into ``into``."""
    planes, values = np.frombuffer(data, np.uint8).reshape(8, n), into.view(np.uint8).reshape(n, 8)
    if n < PLANE_AT_A_TIME:
        np.copyto(values, planes.T)
        return into
    for byte in range(8):
        values[:, byte] = planes[byte]
    return into


def _delta(column: np.ndarray) -> np.ndarray:
    return np.diff(column, prepend=np.int64(0))


def scaled(values: np.ndarray) -> tuple[int, np.ndarray] | None:
    """``(d, integers)`` with ``integers / 10**d`` giving back ``values`` bit for bit, for the
    smallest such ``d``; None when there is none (full precision, a non-finite value, -0.0)."""
    if not np.isfinite(values).all() or (np.abs(values) >= EXACT_INT).any():
        return None
    for decimals in range(MAX_DECIMALS + 1):
        if _exact(values[:64], decimals) is None:  # the first values rule most out cheaply
            continue
        integers = _exact(values, decimals)
        if integers is not None:
            return decimals, integers
    return None


def _exact(values: np.ndarray, decimals: int) -> np.ndarray | None:
    scale = 10.0**decimals
    rounded = np.round(values * scale)
    if (np.abs(rounded) >= EXACT_INT).any():
        return None
    integers = rounded.astype(np.int64)
    same = np.array_equal((integers / scale).view(np.int64), values.view(np.int64))
    return integers if same else None


def encode(steps: np.ndarray, values: np.ndarray) -> bytes:
    """One chunk: ``steps`` (int64, increasing) and their ``values`` (float64)."""
    steps = np.ascontiguousarray(steps, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    found = scaled(values)
    if found is None:
        header = HEADER.pack(FLOAT, 0, len(values))
        column = values.view(np.int64)
    else:
        header = HEADER.pack(SCALED, found[0], len(values))
        column = _delta(found[1])
    body = header + _split(_delta(steps)) + _split(column)
    return bytes([VERSION]) + _zstd().compressor.compress(body)


def decode(
    data: bytes, into: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of a chunk ``encode`` made; ``BadChunk`` for anything else.
    ``into``: the int64 and float64 arrays to write them in, used when they hold exactly its
    points (a curve read whole is decoded into one array, not joined from each chunk's)."""
    if not data:
        raise BadChunk("empty chunk")
    if data[0] != VERSION:
        raise BadChunk(f"chunk format {data[0]}, this tracker reads {VERSION}")
    try:
        body = _zstd().decompressor.decompress(memoryview(data)[1:])
        encoding, decimals, n = HEADER.unpack_from(body)
    except (zstandard.ZstdError, struct.error):
        raise BadChunk("truncated or undecodable") from None
    size = 8 * n
    if len(body) != HEADER.size + 2 * size or encoding not in (FLOAT, SCALED):
        raise BadChunk("truncated or undecodable")
    if into is None or len(into[0]) != n or len(into[1]) != n:
        into = np.empty(n, np.int64), np.empty(n, np.float64)
    steps = np.cumsum(_join(body[HEADER.size : HEADER.size + size], n, into[0]), out=into[0])
    if encoding == SCALED:
        column = _join(body[HEADER.size + size :], n, np.empty(n, np.int64))
        values = np.divide(np.cumsum(column).astype(np.float64), 10.0**decimals, out=into[1])
    else:
        values = _join(body[HEADER.size + size :], n, into[1].view(np.int64)).view(np.float64)
    return steps, values
