"""A store writer killed (SIGKILL, by itself) between its profile's rename and its metadata's:
what a `kill -9` or a node failure at that moment leaves behind, made exactly, not by chance."""

import os
import signal
import sys

from pgle.profiles.files import Profile
from pgle.store.store import ProfileStore

store, fingerprint = sys.argv[1], sys.argv[2]
real_rename = os.rename  # the store renames relative to its folder's descriptor (renameat)


def rename_then_die(src, dst, *args, **kwargs):
    real_rename(src, dst, *args, **kwargs)
    if str(dst).endswith(".pbtxt"):
        os.kill(os.getpid(), signal.SIGKILL)


os.rename = rename_then_die
ProfileStore(store).add(fingerprint, Profile(costs=[("fusion.1", 1.0)]), jax="0.10.2",
                        jaxlib="0.10.2", device_kind="NVIDIA H100", device_count=1, source="killed")
sys.exit("the writer was not killed")
