"""One reader process of the trim-under-a-reader test: build the store's view N times (as
`pgle store get --force` and `run --store` do) and print how many attempts failed."""

import sys

from pgle.errors import PgleError
from pgle.store.store import ProfileStore

store, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
failures = 0
for _ in range(n):
    try:
        ProfileStore(store).materialize(out, jax="0.10.2", device_kind="NVIDIA H100",
                                        policy="replace", force=True)
    except (PgleError, OSError) as e:
        failures += 1
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
print("failures", failures)
