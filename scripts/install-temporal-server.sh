#!/usr/bin/env bash
# Builds the Temporal server and its SQL schema tool into .tools/bin from the Go module
# proxy, as temporal-server and temporal-sql-tool (the names the official images use), and
# copies the release's database schema beside them, so the tests run the same server, on
# PostgreSQL, as docker-compose.yml. The version must match the temporalio/server image
# tag there (test/unit/deploy.compose.test.ts checks both).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$here/.tools/bin"
share="$here/.tools/temporal-server"
version="${TEMPORAL_SERVER_VERSION:-v1.29.1}"

# --if-needed: only warn without Go (the suite on the real server then says what is missing).
if_needed=false
[[ "${1:-}" == --if-needed ]] && if_needed=true

if [[ -x "$bin/temporal-server" && -x "$bin/temporal-sql-tool" && -d "$share/schema" ]] &&
  [[ "$(cat "$share/version" 2>/dev/null)" == "$version" ]]; then
  $if_needed || echo "temporal-server and temporal-sql-tool $version already in $bin"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go not found: install Go >= 1.25 (or >= 1.21, which fetches 1.25 from the module proxy) to build the Temporal server" >&2
  $if_needed && exit 0
  exit 1
fi
mkdir -p "$bin" "$share"
# go install names the binaries after their package folders (server, sql): build them in a
# private folder beside the destination, then rename them in, so no test ever runs a
# half-written binary.
gobin="$(mktemp -d "$bin/.temporal-server-build.XXXXXX")"
trap 'rm -rf "$gobin"' EXIT
echo "building Temporal server $version and its sql tool with $(go version) (several minutes the first time)"
GOBIN="$gobin" go install "go.temporal.io/server/cmd/server@$version" "go.temporal.io/server/cmd/tools/sql@$version"
rm -rf "$share/schema"
cp -r "$(go env GOMODCACHE)/go.temporal.io/server@$version/schema" "$share/schema"
chmod -R u+w "$share/schema"
mv -f "$gobin/server" "$bin/temporal-server"
mv -f "$gobin/sql" "$bin/temporal-sql-tool"
echo "$version" >"$share/version"
echo "built $("$bin/temporal-server" --version)"
