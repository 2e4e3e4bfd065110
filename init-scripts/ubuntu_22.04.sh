#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# QemuRun init script for Ubuntu 22.04 (jammy). Settings and behaviour: see lib/common.sh.
# Runs as is from a checkout; the VM gets the self-contained text that lib/initScripts.ts
# builds by inlining the sourced files.
QR_OS=ubuntu
QR_VERSION=22.04
QR_OS_RELEASE_ID=ubuntu
QR_APT_SOURCES=/etc/apt/sources.list

source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" # qemurun:include
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-family.sh" # qemurun:include

# Nothing the script starts may read its stdin: that is where the script itself comes from.
qr_main "$@" </dev/null
