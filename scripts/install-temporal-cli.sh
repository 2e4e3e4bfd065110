#!/usr/bin/env bash
# Builds the Temporal CLI (which embeds the dev server and the Web UI) into .tools/bin
# from the Go module proxy. v1.5.1 is the newest tag `go install` accepts: later tags
# carry a `replace` for a nested module, which `go install pkg@version` refuses.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$here/.tools/bin"
version="${TEMPORAL_CLI_VERSION:-v1.5.1}"

# --if-needed (npm's prestart): do nothing when the service will not need this binary,
# and only warn without Go, since the SDK's own download remains as a last resort.
if_needed=false
[[ "${1:-}" == --if-needed ]] && if_needed=true
if $if_needed && { [[ -n "${TEMPORAL_ADDRESS:-}" || -n "${TEMPORAL_CLI_PATH:-}" ]] || command -v temporal >/dev/null 2>&1; }; then
  exit 0
fi

if [[ -x "$bin/temporal" ]] && "$bin/temporal" --version >/dev/null 2>&1; then
  $if_needed || echo "temporal CLI already in $bin: $("$bin/temporal" --version)"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go not found: install Go >= 1.25, or set TEMPORAL_CLI_PATH, or let the SDK download the dev server" >&2
  $if_needed && exit 0
  exit 1
fi
mkdir -p "$bin"
echo "building temporal CLI $version with $(go version) (a few minutes the first time)"
GOBIN="$bin" go install "github.com/temporalio/cli/cmd/temporal@$version"
"$bin/temporal" --version
