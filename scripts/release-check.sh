#!/usr/bin/env bash
# release-check.sh TAG: print `package=<name>` when TAG is
# `grelmicro-v<version>` or `grelmicro-core-v<version>` and <version> is
# exactly that package's version in this tree; fail with a message otherwise.
# It enforces the version rule of the two distributions (docs/shipping.md,
# "Versions"), whichever is tagged:
#   - each is MAJOR.MINOR.PATCH+jwt (its own numbers; the +jwt local label
#     keeps it from ever matching the other project's releases on PyPI);
#   - grelmicro-core's version is Cargo.toml's plus +jwt;
#   - grelmicro's jwt extra pins grelmicro-core with == to the tree's core;
#   - the tagged version has its CHANGELOG.md section.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG="${1:?usage: release-check.sh TAG}"
version_of() { sed -n 's/^version = "\(.*\)"/\1/p' "$1" | head -n 1; }
grelmicro="$(version_of "$ROOT/pyproject.toml")"
core="$(version_of "$ROOT/grelmicro-core/pyproject.toml")"
cargo_version="$(version_of "$ROOT/grelmicro-core/Cargo.toml")"
case "$TAG" in
    grelmicro-core-v*) package=grelmicro-core; want="${TAG#grelmicro-core-v}"; have="$core" ;;
    grelmicro-v*) package=grelmicro; want="${TAG#grelmicro-v}"; have="$grelmicro" ;;
    *) echo "tag $TAG is neither grelmicro-v<version> nor grelmicro-core-v<version>" >&2; exit 1 ;;
esac
if [ "$want" != "$have" ]; then
    echo "tag $TAG says $package $want but the tree has $have" >&2
    exit 1
fi
for pair in "grelmicro=$grelmicro" "grelmicro-core=$core"; do
    if ! [[ "${pair#*=}" =~ ^[0-9]+\.[0-9]+\.[0-9]+\+jwt$ ]]; then
        echo "${pair%%=*} ${pair#*=} is not MAJOR.MINOR.PATCH+jwt (docs/shipping.md, Versions)" >&2
        exit 1
    fi
done
if [ "${core%+jwt}" != "$cargo_version" ]; then
    echo "grelmicro-core $core does not match Cargo.toml $cargo_version" >&2
    exit 1
fi
if ! grep -Fq "\"grelmicro-core==$core\"" "$ROOT/pyproject.toml"; then
    echo "grelmicro's jwt extra does not pin grelmicro-core==$core (the tree's core)" >&2
    exit 1
fi
# The version has its section in CHANGELOG.md (a heading naming it).
if ! grep -Eq "^## .*${package} ${have//+/\\+}([ ,]|$)" "$ROOT/CHANGELOG.md"; then
    echo "CHANGELOG.md has no section for $package $have" >&2
    exit 1
fi
echo "package=$package"
