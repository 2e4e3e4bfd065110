#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# QemuRun init script for Debian 13 (trixie). Settings and behaviour: see lib/common.sh.
# Runs as is from a checkout; the VM gets the self-contained text that lib/initScripts.ts
# builds by inlining the sourced files.
QR_OS=debian
QR_VERSION=13
QR_OS_RELEASE_ID=debian
QR_APT_SOURCES=/etc/apt/sources.list.d/debian.sources

source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" # qemurun:include
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-family.sh" # qemurun:include

# Nothing the script starts may read its stdin: that is where the script itself comes from.
qr_main "$@" </dev/null
