"""Give a fresh virtual environment the torch of another one, as pip would have left it there.

Run with the source environment's Python: ``python seed_torch.py TARGET_SITE_PACKAGES [NAME ...]``
(NAME default: torch torchvision). Every file of those distributions and of everything they require
(their ``Requires-Dist`` with the extras asked for, markers evaluated, to the end) is hard-linked into
the target's site-packages, metadata and RECORD included, so that pip there sees them installed and
keeps them: a second torch of several GB costs no download and no disk. A file that cannot be
linked (another file system, a name already taken) is copied. Files a RECORD places outside
site-packages (console scripts) are left out: their first line names the source's interpreter.
"""

import importlib.metadata as metadata
import os
import shutil
import sys
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # an environment without packaging still has pip's own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name


def closure(names: list[str]) -> list[metadata.Distribution]:
    """The distributions named and all they require, with the extras they are required with (torch asks
    for ``cuda-toolkit[cublas,cufile,...]``), installed here; one missing is an error."""
    found: dict[str, metadata.Distribution] = {}
    followed: set[tuple[str, str]] = set()
    pending = [(canonicalize_name(name), "") for name in names]
    while pending:
        name, extra = pending.pop()
        if (name, extra) in followed:
            continue
        followed.add((name, extra))
        if name not in found:
            try:
                found[name] = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                sys.exit(f"seed_torch: {name} is not installed in {sys.prefix}; install it there first")
        for text in found[name].requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                required = canonicalize_name(requirement.name)
                pending += [(required, "")] + [(required, wanted) for wanted in requirement.extras]
    return list(found.values())


def seed(target: Path, names: list[str]) -> tuple[int, int, int]:
    """Link the closure's files into ``target``; returns (files, bytes, files copied)."""
    files = size = copied = 0
    for dist in closure(names):
        for entry in dist.files or []:
            if entry.parts[0] == "..":
                continue
            source = Path(dist.locate_file(entry))
            if not source.is_file():  # RECORD lists compiled files that were never written
                continue
            destination = target / entry
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, destination)
            except OSError:
                shutil.copy2(source, destination)
                copied += 1
            files += 1
            size += source.stat().st_size
    return files, size, copied


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python seed_torch.py TARGET_SITE_PACKAGES [NAME ...]")
    target = Path(sys.argv[1])
    if not target.is_dir():
        sys.exit(f"seed_torch: {target} is not a folder; give the fresh environment's site-packages")
    files, size, copied = seed(target, sys.argv[2:] or ["torch", "torchvision"])
    how = f"{copied} of them copied (could not be linked)" if copied else "all linked"
    print(f"seed_torch: {files} files ({size / 1e9:.1f} GB) from {sys.prefix} into {target}, {how}")


if __name__ == "__main__":
    main()
