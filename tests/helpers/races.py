"""Another process (or the kernel) acting at one exact point of pgle's code, in process and
deterministic.

pgle's shared folders must survive another process removing, renaming or planting a file
between two of its system calls (pgle/shared_folders.py). A race test that loops and hopes to
hit the window is slow and flaky; here a profile hook (sys.setprofile, this thread only) runs
`then` once, just before the C function `func` (os.open, os.link, os.unlink, os.scandir...) is
called from a frame whose local variables satisfy `when`. The call then meets the folder as the
other process left it: real files, real system calls, pgle's own code, no mock.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Locals = Mapping[str, Any]
Step = tuple[Callable[..., Any], Callable[[Locals], bool], Callable[[Locals], object]]


@contextlib.contextmanager
def before_calls(*steps: Step) -> Iterator[list[int]]:
    """Each step (func, when, then), in order: `then(locals)` runs once, before the first call
    of `func` whose caller's locals pass `when` after the previous step ran. Yields the list of
    the steps run so far (assert its length: each window was reached)."""
    done: list[int] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        # A profile function runs with profiling off: what `then` calls is not seen here.
        if event != "c_call" or len(done) == len(steps):
            return
        func, when, then = steps[len(done)]
        if arg is func and when(frame.f_locals):
            done.append(len(done))
            then(frame.f_locals)

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield done
    finally:
        sys.setprofile(old)


def before_call(
    func: Callable[..., Any], when: Callable[[Locals], bool], then: Callable[[Locals], object]
) -> contextlib.AbstractContextManager[list[int]]:
    """One step of `before_calls`."""
    return before_calls((func, when, then))
