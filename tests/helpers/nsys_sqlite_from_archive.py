"""Build an Nsight-Systems-shaped SQLite export from a REAL nsys-jax archive's projected trace.

No public `.nsys-rep`/SQLite export of an XLA run exists to test on, and nsys is not installable
here, so this helper writes the tables pgle's SQLite reader uses (schema of `nsys export --type
sqlite`, see pgle/profiles/nsys_sqlite.py) from the archive's real rows: each NVTX range keeps its
real CPU start/end ("Orig Start/Duration"), domain and nesting; each innermost range gets its real
number of GPU operations as CUDA runtime launches inside its CPU span, the first one covering its
real projected GPU span. pgle's projection of this file must then give the archive's projected
thunk times, and so the same costs. It tests the reader's SQL and projection, not nsys itself.
"""

import csv
import lzma
import sqlite3
import sys

import pyarrow.parquet as pq

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER,
  doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER,
  jsonText TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER,
  callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER, shortName INTEGER);
"""


def gtid(pid, tid):
    return (pid << 24) | tid


def build(archive_dir, out):
    t = pq.read_table(f"{archive_dir}/nvtx_gpu_proj_trace/trace.parquet").to_pydict()
    meta = pq.read_table(f"{archive_dir}/thread-metadata.parquet").to_pydict()
    db = sqlite3.connect(out)
    db.executescript(SCHEMA)
    strings = {}

    def sid(s):
        if s not in strings:
            strings[s] = len(strings) + 1
            db.execute("INSERT INTO StringIds VALUES (?, ?)", (strings[s], s))
        return strings[s]

    for name, pid, tid in zip(meta["Name"], meta["PID"], meta["TID"]):
        db.execute("INSERT INTO ThreadNames VALUES (?, 0, ?)", (sid(name), gtid(pid, tid)))
    domains = {}
    corr = 0
    for i, name in enumerate(t["Name"]):
        rid = t["RangeId"][i]
        if name is None or rid is None or rid != rid:
            continue
        domain, text = name.split(":", 1)
        if domain not in domains:
            domains[domain] = len(domains) + 1
            db.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, domainId) VALUES (0, 75, ?, ?)",
                       (domain, domains[domain]))
        g = gtid(t["PID"][i], t["TID"][i])
        c0 = int(t["Orig Start"][i])
        c1 = c0 + max(int(t["Orig Duration"][i]), 2)
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid, domainId) "
                   "VALUES (?, ?, 59, ?, ?, ?)", (c0, c1, sid(text), g, domains[domain]))
        if t["NumChild"][i] == 0:
            p0 = int(t["Projected Start"][i])
            p1 = p0 + int(t["Projected Duration"][i])
            for k in range(int(t["NumGPUOps"][i])):
                corr += 1
                launch = c0 + 1 + k * max((c1 - c0 - 2) // max(int(t["NumGPUOps"][i]), 1), 0)
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId) "
                           "VALUES (?, ?, ?, ?)", (launch, launch, g, corr))
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, correlationId, globalPid) "
                           "VALUES (?, ?, ?, ?)", (p0, p1 if k == 0 else p0, corr, g - (g & 0xFFFFFF)))
    # The CPU-only compile ranges (which modules were compiled while profiling) from the
    # archive's real push/pop trace; they launch no GPU work of their own here.
    with lzma.open(f"{archive_dir}/report_nvtx_pushpop_trace.csv.xz", "rt", newline="") as f:
        for row in csv.DictReader(f):
            if row["Name"].startswith("TSL:XlaCompileBackend:"):
                db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid, domainId) "
                           "VALUES (?, ?, 59, ?, ?, ?)",
                           (int(row["Start (ns)"]), int(row["End (ns)"]), sid(row["Name"].split(":", 1)[1]),
                            gtid(int(row["PID"]), int(row["TID"])), domains["TSL"]))
    db.commit()
    db.close()


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2])
