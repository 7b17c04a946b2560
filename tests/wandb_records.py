"""Read the records of an offline W&B run file (``run-<id>.wandb``) for assertions.

The file is W&B's 7-byte header (``:W&B``, magic, version) followed by LevelDB-log framing: 32 KiB
blocks of chunks, each with a 7-byte header (crc32c, little-endian length, type: 1 full, 2 first,
3 middle, 4 last). The payloads are ``wandb_internal_pb2.Record`` messages. wandb 0.31 ships no
Python reader, so the tests carry this one.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32768
HEADER = 7


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    found, pending, offset = [], b"", HEADER
    while offset + HEADER <= len(data):
        left_in_block = BLOCK - offset % BLOCK
        if left_in_block < HEADER:
            offset += left_in_block
            continue
        length, kind = struct.unpack_from("<HB", data, offset + 4)
        chunk = data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        if kind == 0 and length == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
    return found


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def logged_metrics(path: Path) -> dict[str, float]:
    """Every history value logged in the run, the last value per key."""
    values = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            values.update({_key(item): json.loads(item.value_json) for item in record.history.item})
    return values


def logged_config(path: Path) -> dict:
    config = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "config":
            config.update({_key(item): json.loads(item.value_json) for item in record.config.update})
    return config
