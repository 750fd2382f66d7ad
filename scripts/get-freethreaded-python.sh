#!/usr/bin/env bash
# Put a free-threaded CPython 3.13t (--disable-gil) on this machine (Debian 12,
# x86_64, reaching only package registries) and print `FT_PYTHON=<path>` last.
#
# No registry this machine reaches ships a free-threaded CPython binary, so it
# is built: the upstream source is the orig tarball of Debian's python3.13
# source package (trixie), fetched through a private apt state directory (the
# machine's apt configuration is untouched); bookworm's compiler and -dev
# packages build it into its own prefix. ~3-4 minutes on 2 cores. Reuses a
# working interpreter already in the prefix.
#
# Env: FT_PREFIX (default /opt/python3.13t), FT_WORK (default
# /var/tmp/grelmicro-ft-build, removed afterwards).
set -euo pipefail
PREFIX="${FT_PREFIX:-/opt/python3.13t}"
WORK="${FT_WORK:-/var/tmp/grelmicro-ft-build}"
PY="$PREFIX/bin/python3.13t"
say() { printf '[get-freethreaded-python] %s\n' "$*" >&2; }

usable() {
    [ -x "$PY" ] && "$PY" -c 'import sys, ssl, ctypes, zlib, venv, ensurepip; sys.exit(sys._is_gil_enabled())' 2>/dev/null
}
if usable; then
    echo "FT_PYTHON=$PY"
    exit 0
fi

need=(build-essential pkg-config xz-utils ca-certificates libssl-dev libffi-dev zlib1g-dev
      libbz2-dev liblzma-dev libsqlite3-dev libreadline-dev libncurses-dev uuid-dev libexpat1-dev)
missing=()
for package in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing build dependencies: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

say "fetching the python3.13 source package (Debian trixie) through a private apt state"
rm -rf "$WORK"
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/apt/parts" "$WORK/src"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$WORK/apt/sources.list"
apt_private=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o "Dir::Etc::SourceParts=$WORK/apt/parts"
             -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o "APT::Sandbox::User=root")
apt-get "${apt_private[@]}" update -qq
(cd "$WORK/src" && apt-get "${apt_private[@]}" source --download-only -qq python3.13/trixie)
tarball="$(find "$WORK/src" -name 'python3.13_*.orig.tar.*' ! -name '*.asc' | head -n 1)"
[ -n "$tarball" ] || { echo "no python3.13 orig tarball downloaded" >&2; exit 1; }

say "building $(basename "$tarball") with --disable-gil into $PREFIX"
mkdir -p "$WORK/build"
tar -xf "$tarball" -C "$WORK/build" --strip-components=1
cd "$WORK/build"
OPT="-DNDEBUG -g0 -O3" ./configure --prefix="$PREFIX" --disable-gil --disable-test-modules \
    --with-ensurepip=install >"$WORK/configure.log" 2>&1 || { tail -30 "$WORK/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$WORK/make.log" 2>&1 || { tail -40 "$WORK/make.log" >&2; exit 1; }
make install >"$WORK/install.log" 2>&1 || { tail -30 "$WORK/install.log" >&2; exit 1; }
cd /
rm -rf "$WORK"
usable || { echo "the interpreter built at $PY does not work (or has the GIL)" >&2; exit 1; }
say "$("$PY" -VV)"
echo "FT_PYTHON=$PY"
