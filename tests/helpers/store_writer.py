"""One writer process of the concurrency tests: add N profiles of 3 modules to a shared store
(policy keep:3 unless given: `replace` trims at every add; device kind H100 unless given)."""

import sys

from pgle.profiles.files import Profile
from pgle.store.store import ProfileStore

store, writer, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
policy = sys.argv[4] if len(sys.argv) > 4 else "keep:3"
device_kind = sys.argv[5] if len(sys.argv) > 5 else "H100"
st = ProfileStore(store, create=True)
for i in range(n):
    for m in range(3):
        fp = f"{m:032x}"
        st.add(fp, Profile(costs=[(f"fusion.{k}", float(writer * 1000 + i)) for k in range(50)]),
               jax="0.10.2", jaxlib="0.10.2", device_kind=device_kind, device_count=8,
               source=f"writer {writer} run {i}", policy=policy)
