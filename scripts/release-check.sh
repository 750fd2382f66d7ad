#!/usr/bin/env bash
# release-check.sh TAG: print `package=<name>` when TAG is
# `grelmicro-v<version>` or `grelmicro-core-v<version>` and <version> is
# exactly that package's version in this tree; fail with a message otherwise.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG="${1:?usage: release-check.sh TAG}"
version_of() { sed -n 's/^version = "\(.*\)"/\1/p' "$1" | head -n 1; }
case "$TAG" in
    grelmicro-core-v*) package=grelmicro-core; want="${TAG#grelmicro-core-v}"; have="$(version_of "$ROOT/grelmicro-core/pyproject.toml")" ;;
    grelmicro-v*) package=grelmicro; want="${TAG#grelmicro-v}"; have="$(version_of "$ROOT/pyproject.toml")" ;;
    *) echo "tag $TAG is neither grelmicro-v<version> nor grelmicro-core-v<version>" >&2; exit 1 ;;
esac
if [ "$want" != "$have" ]; then
    echo "tag $TAG says $package $want but the tree has $have" >&2
    exit 1
fi
cargo_version="$(version_of "$ROOT/grelmicro-core/Cargo.toml")"
if [ "$package" = grelmicro-core ] && [ "${have%%+*}" != "$cargo_version" ]; then
    echo "grelmicro-core $have does not match Cargo.toml $cargo_version" >&2
    exit 1
fi
# The version has its section in CHANGELOG.md (a heading naming it).
if ! grep -Eq "^## .*${package} ${have//+/\\+}([ ,]|$)" "$ROOT/CHANGELOG.md"; then
    echo "CHANGELOG.md has no section for $package $have" >&2
    exit 1
fi
echo "package=$package"
