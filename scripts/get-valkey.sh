#!/usr/bin/env bash
# Put valkey-server on this machine (Debian 12) for the replay-store tests and
# print `VALKEY_SERVER=<path>` last.
#
# Valkey is packaged from Debian trixie on; bookworm has none, and trixie's
# binary needs glibc 2.38+. So the binary package and the shared libraries it
# loads (trixie's glibc included) are fetched through a private apt state
# directory (the machine's apt configuration is untouched), unpacked into
# their own prefix, and `bin/valkey-server` runs the binary with trixie's own
# dynamic loader over that prefix only. Nothing is compiled, nothing of the
# system is replaced. Seconds once the package lists are fetched (~20 s).
#
# Env: VALKEY_PREFIX (default /opt/valkey), VALKEY_WORK (default
# /var/tmp/grelmicro-valkey, removed afterwards).
set -euo pipefail
PREFIX="${VALKEY_PREFIX:-/opt/valkey}"
WORK="${VALKEY_WORK:-/var/tmp/grelmicro-valkey}"
say() { printf '[get-valkey] %s\n' "$*" >&2; }

usable() {
    [ -x "$PREFIX/bin/valkey-server" ] && "$PREFIX/bin/valkey-server" --version 2>/dev/null | grep -q '^Valkey server'
}
if usable; then
    echo "VALKEY_SERVER=$PREFIX/bin/valkey-server"
    exit 0
fi
[ "$(dpkg --print-architecture)" = amd64 ] || say "untested architecture: $(dpkg --print-architecture)"

# valkey-tools holds the server binary (valkey-server is its service wrapper);
# the rest is what that binary and its libraries load (objdump -p: NEEDED).
packages=(valkey-tools libc6 libgcc-s1 libstdc++6 libatomic1 liblzf1 libjemalloc2 libssl3t64
          libsystemd0 libcap2 libzstd1 zlib1g)

say "fetching ${packages[*]} (Debian trixie) through a private apt state"
rm -rf "$WORK"
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/apt/parts" "$WORK/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$WORK/apt/sources.list"
apt_private=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o "Dir::Etc::SourceParts=$WORK/apt/parts"
             -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o "APT::Sandbox::User=root")
apt-get "${apt_private[@]}" update -qq
(cd "$WORK/debs" && apt-get "${apt_private[@]}" download -qq "${packages[@]/%//trixie}")

say "unpacking into $PREFIX"
rm -rf "$PREFIX"
mkdir -p "$PREFIX/root" "$PREFIX/bin"
for deb in "$WORK"/debs/*.deb; do
    dpkg-deb -x "$deb" "$PREFIX/root"
done
triplet="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"
loader="$(find "$PREFIX/root/usr/lib64" "$PREFIX/root/usr/lib/$triplet" -maxdepth 1 -name 'ld-linux*.so.*' 2>/dev/null | head -n 1)"
[ -n "$loader" ] || { echo "no dynamic loader in the unpacked libc6" >&2; exit 1; }
# The server binary is shipped as valkey-check-aof (one binary, mode by name).
cat >"$PREFIX/bin/valkey-server" <<WRAP
#!/bin/sh
exec "$loader" --library-path "$PREFIX/root/usr/lib/$triplet" --argv0 valkey-server "$PREFIX/root/usr/bin/valkey-check-aof" "\$@"
WRAP
cat >"$PREFIX/bin/valkey-cli" <<WRAP
#!/bin/sh
exec "$loader" --library-path "$PREFIX/root/usr/lib/$triplet" "$PREFIX/root/usr/bin/valkey-cli" "\$@"
WRAP
chmod +x "$PREFIX/bin/valkey-server" "$PREFIX/bin/valkey-cli"
rm -rf "$WORK"
usable || { echo "valkey-server in $PREFIX does not run" >&2; exit 1; }
say "$("$PREFIX/bin/valkey-server" --version)"
echo "VALKEY_SERVER=$PREFIX/bin/valkey-server"
