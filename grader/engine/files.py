"""Reading a file the grader did not write: a regular file, bounded, never a hang.

A FIFO, a device or a socket would block ``open`` or ``read`` forever (or, like
/dev/zero, never end); a hard link is a second name of a file that lives elsewhere (a
student's folder can hold one to the instructor's secret); a huge file is memory the
grader never meant to spend. Every reader of learner or instructor input goes through
``read_regular``, so those rules live in one place.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

# What a path that is there but no file or folder is called (a FIFO would block a read,
# /dev/zero never ends one).
NOT_REGULAR = "is not a regular file (a pipe, a device or a socket)"


class Unreadable(Exception):
    """Why a file was refused, in words for one line (``str(err)``); ``strerror`` is the
    system's reason when the system refused it, None when a rule here did."""

    def __init__(self, message: str, strerror: str | None = None):
        super().__init__(message)
        self.strerror = strerror


def read_regular(path: str | Path, limit: int, *, single_name: bool = False,
                 follow_links: bool = True) -> bytes:
    """At most ``limit`` + 1 bytes of ``path`` (the caller decides what "too large" says).

    Opened non-blocking, so a FIFO cannot hang the open; refused unread unless it is a
    regular file (and, with ``single_name``, unless it has exactly one name: a hard link's
    other name may be anything on the file system). FileNotFoundError passes through;
    every other refusal is Unreadable."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise Unreadable("is a folder, not a file") from None
    except OSError as e:
        if not follow_links and os.path.islink(path):
            raise Unreadable("is a symbolic link: not read") from None
        raise Unreadable(f"cannot be read: {e.strerror or e}", e.strerror or str(e)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise Unreadable("is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{NOT_REGULAR}: not read")
        if single_name and info.st_nlink > 1:
            raise Unreadable(f"is a hard link (the file has {info.st_nlink} names): not read; "
                             f"hand in a copy of the file itself")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise Unreadable(f"cannot be read: {e.strerror or e}", e.strerror or str(e)) from None
    finally:
        os.close(fd)
