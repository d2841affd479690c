#!/usr/bin/env bash
# Builds (once) the CPython 3.13 that the lane's jax >= 0.11 environments need: jax 0.11+ wants
# Python >= 3.12 and this machine's Debian 12 ships only 3.11. The source comes from Debian's own
# archive (trixie's python3.13 source package), fetched with a private apt state so the machine's
# sources stay untouched. The interpreter is cached in $PGLE_LANE_PY313 (default
# $HOME/.cache/pgle-lane/python3.13) and reused when `bin/python3.13 -c 'import ssl, venv'` works.
# Measured on 2 cores: 6-15 min to build (see docs/gpu-validation.md, "Cost"); 0.1 s to reuse.
# Prints the interpreter's path on stdout; exits non-zero (never silently) when it cannot build.
set -euo pipefail
PREFIX="${PGLE_LANE_PY313:-$HOME/.cache/pgle-lane/python3.13}"
PYBIN="$PREFIX/bin/python3.13"
if [ -x "$PYBIN" ] && "$PYBIN" -c 'import ssl, venv, zlib, ctypes, lzma, bz2, sqlite3' 2>/dev/null; then
    echo "$PYBIN"; exit 0
fi
echo "python313: building CPython 3.13 into $PREFIX (6-15 min on 2 cores)" >&2
t0=$(date +%s)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/lists/partial" "$W/cache/archives/partial"
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$W/src.sources"
A=(-o "Dir::Etc::sourcelist=$W/src.sources" -o Dir::Etc::sourceparts=/nonexistent
   -o "Dir::State::Lists=$W/lists" -o "Dir::Cache=$W/cache")
# Build headers; present on the project's machines, installed when missing.
need=()
for p in libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq >&2
    apt-get install -y -qq "${need[@]}" >&2
fi
apt-get "${A[@]}" update -qq >&2
(cd "$W" && apt-get "${A[@]}" source --download-only python3.13 >&2)
tar -C "$W" -xJf "$W"/python3.13_*.orig.tar.xz
src=$(ls -d "$W"/Python-3.13.*)
rm -rf "$PREFIX"
(cd "$src" && ./configure -q --prefix="$PREFIX" --with-ensurepip=install >&2 \
    && make -s -j"$(nproc)" >&2 && make -s install >&2)
"$PYBIN" -c 'import ssl, venv, zlib, ctypes, lzma, bz2, sqlite3'
echo "python313: built in $(( $(date +%s) - t0 )) s" >&2
echo "$PYBIN"
