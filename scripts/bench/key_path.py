"""Where one config key's number goes in a run: every file of the package whose code reads it, from the
command line to results.json.

    .venv/bin/python scripts/bench/key_path.py noise.rate=0.123457 trainer.max_epochs=1 hydra.run.dir=/tmp/kp

The first override is the key followed: its value (a float no other key holds) is made a float that notes
each operation on it, and the key's node notes each read of the config there; the rest of the arguments
are the run's. One ``noisydml`` run, in this process. It prints each read's call path through the
package's files, then the files in call order: a step into a file the walk had left (a caller again, to
call another function) is a return.
"""

from __future__ import annotations

import atexit
import sys
import traceback
from pathlib import Path

from omegaconf import DictConfig, nodes

import noisydml

SOURCES = Path(noisydml.__file__).resolve().parents[1]
if len(sys.argv) < 2 or "=" not in sys.argv[1]:
    sys.exit(__doc__)
KEY, VALUE = sys.argv[1].split("=", 1)
PARENT, LEAF = KEY.rpartition(".")[0], KEY.rpartition(".")[2]
TRACED = float(VALUE)
paths: list[tuple[str, ...]] = []


def note() -> None:
    """The files of the package on the call path to this read, each once where the path stays in it."""
    files: list[str] = []
    for frame in traceback.extract_stack()[:-2]:
        path = Path(frame.filename).resolve()
        if path.is_relative_to(SOURCES) and (name := str(path.relative_to(SOURCES))) not in files[-1:]:
            files.append(name)
    if files:
        paths.append(tuple(files))


class Traced(float):
    """The followed number: each operation on it is a read."""


def _noting(name: str):
    operation = getattr(float, name)

    def noted(self, *args):
        note()
        return operation(self, *args)

    return noted


for _name in (
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__hash__",
    "__bool__",
    "__float__",
    "__int__",
    "__round__",
    "__format__",
    "__str__",
    "__repr__",
    "__mul__",
    "__rmul__",
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__truediv__",
    "__rtruediv__",
):
    setattr(Traced, _name, _noting(_name))


def _tracing(convert):
    def converted(self, value):
        value = convert(self, value)
        return Traced(value) if type(value) is float and value == TRACED else value

    return converted


for _node in (nodes.AnyNode, nodes.FloatNode):
    _node._validate_and_convert_impl = _tracing(_node._validate_and_convert_impl)
_get_node = DictConfig._get_node


def _reading(self, key, *args, **kwargs):
    if key == LEAF and str(self._get_full_key(None)) == PARENT:
        note()
    return _get_node(self, key, *args, **kwargs)


DictConfig._get_node = _reading


def report() -> None:
    # A path read again at once is one visit.
    visits = [path for i, path in enumerate(paths) if path not in paths[i - 1 : i]]
    walked: list[str] = []
    previous: tuple[str, ...] = ()
    for path in visits:
        shared = 0
        while shared < min(len(previous), len(path)) and previous[shared] == path[shared]:
            shared += 1
        # From the last file the two paths share (the caller returned to), down the new one.
        walked += [f for f in path[max(shared - 1, 0) :] if f not in walked[-1:]]
        previous = path
    returns = sum(f in walked[:i] for i, f in enumerate(walked))
    lines = [f"\n{KEY}: read on {len(visits)} call paths", *("  " + " > ".join(p) for p in visits)]
    lines += [f"{len(set(walked))} files, {len(walked) - 1} steps, {returns} into a file left:"]
    print("\n".join([*lines, "  " + " > ".join(walked)]), file=sys.stderr)


atexit.register(report)
sys.argv = ["noisydml", f"{KEY}={VALUE}", *sys.argv[2:]]
from noisydml.run.cli import main  # noqa: E402

main()
