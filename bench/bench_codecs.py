"""Candidate codecs for curve chunks: bytes per point and encode+decode time.

    python bench/bench_codecs.py [--steps 250000]

One generated loss curve of STEPS points, at full precision and rounded to 4 decimals,
through each candidate (every optional library measured if installed: zstandard, numcodecs,
blosc2, pyarrow), each decoded back and checked, beside the tracker's own chunk format.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from tracker.sample.arms import _loss_curve
from tracker.store import codec


def split(values: np.ndarray) -> bytes:
    return values.view(np.uint8).reshape(-1, 8).T.tobytes()


def candidates() -> dict[str, Callable[[np.ndarray, np.ndarray], int]]:
    """name -> bytes of (steps, values) encoded, decoded back and checked."""
    import zstandard

    found: dict[str, Callable[[np.ndarray, np.ndarray], int]] = {}

    def tracker_codec(steps: np.ndarray, values: np.ndarray) -> int:
        total = 0
        for start in range(0, len(values), 16_384):
            data = codec.encode(steps[start : start + 16_384], values[start : start + 16_384])
            back = codec.decode(data)[1]
            assert back.tobytes() == values[start : start + 16_384].tobytes()
            total += len(data)
        return total

    def zstd_plain(steps: np.ndarray, values: np.ndarray) -> int:
        data = zstandard.ZstdCompressor(level=3).compress(
            np.diff(steps).tobytes() + values.tobytes()
        )
        zstandard.ZstdDecompressor().decompress(data)
        return len(data)

    def zstd_split(steps: np.ndarray, values: np.ndarray) -> int:
        body = split(np.diff(steps)) + split(values)
        data = zstandard.ZstdCompressor(level=3).compress(body)
        zstandard.ZstdDecompressor().decompress(data)
        return len(data)

    found["tracker (zstd 3, split, scaled decimals)"] = tracker_codec
    found["zstandard 3, no split"] = zstd_plain
    found["zstandard 3, byte-stream split"] = zstd_split
    try:
        from numcodecs import Blosc

        blosc = Blosc(cname="zstd", clevel=3, shuffle=Blosc.SHUFFLE)

        def numcodecs_blosc(steps: np.ndarray, values: np.ndarray) -> int:
            data = [blosc.encode(np.diff(steps)), blosc.encode(values)]
            blosc.decode(data[1])
            return sum(len(d) for d in data)

        found["numcodecs Blosc(zstd 3, shuffle)"] = numcodecs_blosc
    except ImportError:
        pass
    try:
        import blosc2

        def blosc2_zstd(steps: np.ndarray, values: np.ndarray) -> int:
            params = {"codec": blosc2.Codec.ZSTD, "clevel": 3, "filters": [blosc2.Filter.SHUFFLE]}
            data = [blosc2.compress2(np.diff(steps), **params), blosc2.compress2(values, **params)]
            blosc2.decompress2(data[1])
            return sum(len(d) for d in data)

        found["blosc2 (zstd 3, shuffle)"] = blosc2_zstd
    except ImportError:
        pass
    try:
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        def parquet_split(steps: np.ndarray, values: np.ndarray) -> int:
            sink = io.BytesIO()
            table = pa.table({"step": steps, "value": values})
            pq.write_table(
                table,
                sink,
                compression="zstd",
                use_dictionary=False,
                column_encoding={"step": "DELTA_BINARY_PACKED", "value": "BYTE_STREAM_SPLIT"},
            )
            pq.read_table(io.BytesIO(sink.getvalue()))
            return len(sink.getvalue())

        found["pyarrow Parquet (delta, byte-stream split, zstd)"] = parquet_split
    except ImportError:
        pass
    return found


def bench_codecs(steps: int) -> None:
    loss = _loss_curve(0, "ref", 0, steps)
    curves = {"full precision": loss, "4 decimals": np.round(loss, 4)}
    step = np.arange(steps, dtype=np.int64)
    print(f"\n## codecs: one loss curve of {steps:,} points (bytes/point, encode+decode)")
    for name, encode in candidates().items():
        cells = []
        for label, values in curves.items():
            start = time.perf_counter()
            size = encode(step, values)
            cells.append(f"{label} {size / steps:5.2f} B/pt {time.perf_counter() - start:6.3f} s")
        print(f"  {name:48} " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250_000)
    bench_codecs(parser.parse_args().steps)


if __name__ == "__main__":
    main()
