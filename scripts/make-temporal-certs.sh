#!/usr/bin/env bash
# Makes the certificates for mTLS between QemuRun and its Temporal server, at deploy time,
# on the deploying machine: a CA of this deployment only, the server's certificate (for
# the names the service and the UI dial) and client certificates for the service, the
# Temporal UI and the admin tools. Nothing made here belongs in git (certs/ is ignored).
#
#   scripts/make-temporal-certs.sh [DIR] [SERVER_NAME...]   default: ./certs temporal localhost
#
# Keys are written 0600. An existing DIR/ca.key is reused, so running it again renews the
# leaf certificates without changing what the server trusts.
set -euo pipefail

dir=${1:-certs}
shift || true
names=("${@:-temporal}")
[[ $# -gt 0 ]] || names=(temporal localhost)
days=${CERT_DAYS:-825}

command -v openssl >/dev/null || { echo "openssl is needed" >&2; exit 1; }
mkdir -p "$dir"
chmod 700 "$dir"
umask 077

if [[ ! -f $dir/ca.key ]]; then
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/ca.key"
  openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 3650 -subj "/CN=QemuRun Temporal CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out "$dir/ca.pem"
fi

# leaf NAME USAGE [SAN]
leaf() {
  local name=$1 usage=$2 san=${3:-}
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/$name.key"
  local ext
  ext=$(mktemp)
  trap 'rm -f "$ext"' RETURN
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -z $san ]] || echo "subjectAltName=$san"
  } >"$ext"
  openssl req -new -key "$dir/$name.key" -subj "/CN=$name" -out "$dir/$name.csr"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -sha256 -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr"
}

san=$(printf 'DNS:%s,' "${names[@]}")
leaf server serverAuth,clientAuth "${san%,}"
for client in qemurun temporal-ui admin-tools; do leaf "$client" clientAuth; done
chmod 644 "$dir"/*.pem
echo "certificates in $dir: ca.pem, server.{pem,key} (${names[*]}), qemurun/temporal-ui/admin-tools.{pem,key}"
