"""The records of a W&B run file (``run-<id>.wandb``), and the steps its history holds.

The file is W&B's 7-byte header (``:W&B``, magic, version) followed by LevelDB-log framing: 32 KiB blocks
of chunks, each with a 7-byte header (crc32c, little-endian length, type: 1 full, 2 first, 3 middle,
4 last). The payloads are ``wandb_internal_pb2.Record`` messages. wandb ships no Python reader.

A run killed outright leaves the file cut wherever W&B's buffer was last written: the records up to the
cut are read, a record cut in two is not.
"""

from __future__ import annotations

import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    """The whole records of ``path``, in order; [] for a file that is not a W&B run file."""
    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        return []
    found, pending, offset = [], b"", HEADER
    while offset + HEADER <= len(data):
        left_in_block = BLOCK - offset % BLOCK
        if left_in_block < HEADER:
            offset += left_in_block
            continue
        length, kind = struct.unpack_from("<HB", data, offset + 4)
        if (kind == 0 and length == 0) or offset + HEADER + length > len(data):
            break
        chunk = data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(pending)
            except Exception:
                break
            found.append(record)
    return found


def history_steps(path: Path) -> set[int]:
    """The W&B steps (``_step``) whose history rows ``path`` holds."""
    steps = set()
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                if (item.key or "/".join(item.nested_key)) == "_step":
                    steps.add(int(item.value_json))
    return steps
