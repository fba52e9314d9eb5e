"""What the profile needs after the program ends, set aside before it starts (``reserve``)."""

from __future__ import annotations

import os


# ---- resources the profile needs ----------------------------------------------------------
# The profile is built after the program ends, importing the model and the reporters then (they
# are not resident while it runs). A program that used up its file descriptors or lowered its
# resource limits would make those imports, and the profile file, fail. So before it starts,
# peakline notes the limits, holds two spare descriptors (one pipe, numbered just below the
# descriptor limit, close-on-exec) and 32 MiB of address space (PROT_NONE: no memory, only
# address space, which an RLIMIT_AS cap counts); after it ends, the limits it lowered are
# raised back where the kernel allows it and the spares are released.
_LIMITS = ("RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_FSIZE")
SPARE_ADDRESS_SPACE_BYTES = 32 << 20


class Reserve:
    """What ``reserve()`` set aside for writing the profile; ``release()`` gives it back."""

    __slots__ = ("limits", "spares", "space")

    def __init__(self) -> None:
        self.limits: dict[int, tuple[int, int]] = {}
        self.spares: list[tuple[int, int, int]] = []   # (fd, st_dev, st_ino)
        self.space = None                              # an mmap of PROT_NONE pages

    def release(self) -> None:
        """Raises the limits the program lowered back (as far as allowed), closes the spares
        that are still the pipe this set aside (the program may have closed and reused them)."""
        resource = _resource_module()
        for which, (soft, hard) in self.limits.items():
            try:
                now_soft, now_hard = resource.getrlimit(which)
            except (OSError, ValueError, AttributeError):
                continue
            if _below(now_soft, soft) or _below(now_hard, hard):
                for wanted in ((soft, hard), (_min_limit(soft, now_hard), now_hard)):
                    try:
                        resource.setrlimit(which, wanted)
                        break
                    except (OSError, ValueError):
                        continue
        self.limits.clear()
        if self.space is not None:
            self.space.close()
            self.space = None
        for fd, dev, ino in self.spares:
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == (dev, ino):
                    os.close(fd)
            except OSError:
                pass
        self.spares.clear()


def _below(value: int, than: int) -> bool:
    """value < than, where RLIM_INFINITY is above every number."""
    return value != than and _min_limit(value, than) == value


def _min_limit(a: int, b: int) -> int:
    infinity = getattr(_resource_module(), "RLIM_INFINITY", -1)
    if a == infinity:
        return b
    if b == infinity:
        return a
    return min(a, b)


def _resource_module():
    try:
        import resource
        return resource
    except ImportError:
        return None


def reserve() -> Reserve:
    """Before the program starts: note the limits, set two descriptors aside."""
    held = Reserve()
    resource = _resource_module()
    if resource is None:
        return held
    for name in _LIMITS:
        which = getattr(resource, name, None)
        if which is not None:
            try:
                held.limits[which] = resource.getrlimit(which)
            except (OSError, ValueError):
                pass
    try:
        import mmap
        # PROT_NONE (0; the mmap module has no name for it): never committed, never resident.
        held.space = mmap.mmap(-1, SPARE_ADDRESS_SPACE_BYTES,
                               flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)
    except (ImportError, OSError, ValueError, AttributeError):
        held.space = None
    soft = held.limits.get(getattr(resource, "RLIMIT_NOFILE", -1), (1024, 1024))[0]
    if soft == resource.RLIM_INFINITY or soft > 1 << 20:
        soft = 1 << 20
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return held
    target = soft - 1
    for fd in (read_end, write_end):
        # Just below the limit, so the program's own descriptors get the numbers they would
        # get unprofiled; where no such slot is free, the pipe keeps its numbers.
        while target > fd + 8:
            try:
                os.fstat(target)
            except OSError:
                break
            target -= 1
        if target > fd + 8:
            os.dup2(fd, target, inheritable=False)
            os.close(fd)
            fd = target
            target -= 1
        st = os.fstat(fd)
        held.spares.append((fd, st.st_dev, st.st_ino))
    return held

