"""The uid a job runs as outside its namespaces, for a root harness: one of its own.

A job that ran as the machine's shared ``nobody`` could be read by anything else running as
``nobody`` (its submission, its build folders, ``/proc/<pid>``), and the kernel counts
``RLIMIT_NPROC`` per uid, across jobs. Each job instead gets a uid from
``KERNELCUP_SANDBOX_UID_RANGE`` (default :data:`DEFAULT_RANGE`, above the ids a distribution
hands out and the subordinate ranges of rootless containers), never one ``/etc/passwd`` names,
and the same number for its gid. Which uid is free is settled with a lock file per uid under
:data:`LOCKS` (root's alone): the holder keeps an open descriptor locked with ``flock`` for
as long as the job's processes may run, and the kernel drops the lock when the last copy of that
descriptor closes, so a killed harness frees its uid with its processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import stat
from dataclasses import dataclass

RANGE_ENV = "KERNELCUP_SANDBOX_UID_RANGE"
DEFAULT_RANGE = "2000000000-2000065535"
LOCKS = "/run/kernelcup/uids"  # one empty file per uid ever leased; flock marks the ones in use
MOST_TRIED = 4096  # uids tried before giving up (a range that full has a leak to look into)


class UidError(Exception):
    pass


@dataclass(frozen=True)
class Lease:
    uid: int
    fd: int  # locked; the uid is this job's while any copy of it is open

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def configured_range(value: str | None = None) -> range:
    """The uids jobs may be given: ``FIRST-LAST`` (inclusive) from ``KERNELCUP_SANDBOX_UID_RANGE``."""
    text = (os.environ.get(RANGE_ENV) if value is None else value) or DEFAULT_RANGE
    first, _, last = text.partition("-")
    try:
        uids = range(int(first), int(last) + 1)
    except ValueError:
        raise UidError(f"{RANGE_ENV}={text!r} is not FIRST-LAST (e.g. {DEFAULT_RANGE})") from None
    if not uids or uids.start < 1 or uids.stop > 0xFFFFFFFF:
        raise UidError(f"{RANGE_ENV}={text!r} is not a range of uids between 1 and 4294967294")
    return uids


def _extents(uid_map: str | None) -> list[tuple[int, int]]:
    """The uids this process's user namespace has, as (first, count): ``/proc/self/uid_map``."""
    if uid_map is None:
        try:
            with open("/proc/self/uid_map") as lines:
                uid_map = lines.read()
        except OSError:
            return []
    try:
        return [(int(fields[0]), int(fields[2])) for fields in map(str.split, uid_map.splitlines()) if fields]
    except (ValueError, IndexError):
        return []


def mapped(uids: range, uid_map: str | None = None) -> bool:
    """Whether every uid of ``uids`` exists in this process's user namespace (a container maps
    only some; a uid outside them cannot be given to a job)."""
    return any(first <= uids.start and uids.stop <= first + count for first, count in _extents(uid_map))


def highest_mapped(size: int, uid_map: str | None = None) -> range | None:
    """The last ``size`` uids (fewer where the namespace has fewer) of the highest block this
    user namespace maps, never uid 0: where the default range is not mapped (a container), the
    uids least likely to belong to anyone else there."""
    blocks = [(first, count) for first, count in _extents(uid_map) if first + count > 1]
    if not blocks:
        return None
    first, count = max(blocks, key=lambda block: block[0] + block[1])
    end = first + count
    return range(max(first, 1, end - size), end)


def lease(uids: range, locks: str = LOCKS) -> Lease:
    """A uid of ``uids`` that no running job holds and no user of ``/etc/passwd`` has, locked for
    the caller (start at a random one, so two harnesses rarely try the same)."""
    folder = _lock_folder(locks)
    first = secrets.randbelow(len(uids))
    for step in range(min(len(uids), MOST_TRIED)):
        uid = uids[(first + step) % len(uids)]
        if _in_passwd(uid):
            continue
        fd = os.open(os.path.join(folder, str(uid)), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Lease(uid, fd)
    raise UidError(f"no free uid in {uids.start}-{uids.stop - 1} ({RANGE_ENV}) after {MOST_TRIED} tries")


def _in_passwd(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _lock_folder(path: str) -> str:
    """``path``, made if missing, refused unless it is a folder of this uid's alone (another user
    who could write there could hold every uid, or plant links)."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise UidError(f"{path} must be a folder of uid {os.geteuid()} that no one else may write")
    return path
