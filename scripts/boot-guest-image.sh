#!/usr/bin/env bash
# Boot check for an image made by build-guest-image.sh, wired the way
# Proxmox VE wires a VM: virtio-scsi disk, IDE CD-ROM with a NoCloud seed
# (volume id "cidata", made like qemu-server makes it), virtio-net with a
# fixed MAC, a QEMU guest agent channel, SeaBIOS, TCG only (no -kernel: the
# image's own boot loader must boot it).
#
# Usage: boot-guest-image.sh <image.qcow2> <ssh-port>
#
# Boots two throw-away overlays (8 GiB) one after the other. The first boot
# checks: SSH as the cloud-init user "alice", PID 1 is systemd, the root
# filesystem grew to the overlay size, qemu-guest-agent runs and answers,
# passwordless sudo, no "debian" account, `apt-get update` works. The second
# boot only checks that the SSH host keys differ from the first boot's.
# Exit status 0 when every check passes.
set -euo pipefail

PROG=boot-guest-image
[[ $# -eq 2 ]] || { echo "usage: $0 <image.qcow2> <ssh-port>" >&2; exit 2; }
IMAGE=$(readlink -f "$1")
PORT=$2
[[ -f $IMAGE ]] || { echo "$PROG: no such image: $1" >&2; exit 2; }
[[ $PORT =~ ^[0-9]+$ ]] || { echo "$PROG: bad port: $PORT" >&2; exit 2; }
SSH_TIMEOUT=${BOOT_CHECK_SSH_TIMEOUT:-600}

for cmd in qemu-system-x86_64 qemu-img genisoimage ssh ssh-keygen sha1sum; do
  command -v "$cmd" >/dev/null || { echo "$PROG: missing command: $cmd" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/boot-guest-image.XXXXXX")
QEMU_PID=""
FAILED=0

cleanup() {
  if [[ -n $QEMU_PID ]] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

say() { echo "$PROG: $*"; }
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then say "PASS $what"; else say "FAIL $what"; FAILED=1; fi
}

ssh-keygen -q -t ed25519 -N '' -C boot-check -f "$WORK/key"
SSH=(ssh -i "$WORK/key" -p "$PORT" -o BatchMode=yes -o ConnectTimeout=5
     -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
     alice@127.0.0.1)
guest() { "${SSH[@]}" "$@"; }

# NoCloud seed as Proxmox writes it (ciuser=alice, static ipconfig0)
make_seed() {
  local dir=$1 name=$2
  mkdir -p "$dir/seed"
  cat > "$dir/seed/user-data" <<EOF
#cloud-config
hostname: $name
manage_etc_hosts: true
fqdn: $name
user: alice
ssh_authorized_keys:
  - $(cat "$WORK/key.pub")
chpasswd:
  expire: False
users:
  - default
package_upgrade: false
EOF
  cat > "$dir/seed/network-config" <<'EOF'
version: 1
config:
    - type: physical
      name: eth0
      mac_address: '52:54:00:12:34:56'
      subnets:
      - type: static
        address: '10.0.2.15'
        netmask: '255.255.255.0'
        gateway: '10.0.2.2'
    - type: nameserver
      address:
      - '10.0.2.3'
EOF
  local id
  id=$(cat "$dir/seed/user-data" "$dir/seed/network-config" | sha1sum | cut -d' ' -f1)
  printf 'instance-id: %s\n' "$id" > "$dir/seed/meta-data"
  (cd "$dir/seed" && genisoimage -quiet -output ../seed.iso -volid cidata -joliet -rock \
     -iso-level 3 user-data meta-data network-config)
}

# boot <dir>: start the VM from a fresh 8 GiB overlay, wait for SSH
boot() {
  local dir=$1 name=$2 t0 deadline
  mkdir -p "$dir"
  qemu-img create -q -f qcow2 -b "$IMAGE" -F qcow2 "$dir/overlay.qcow2"
  qemu-img resize -q "$dir/overlay.qcow2" 8G
  make_seed "$dir" "$name"
  t0=$SECONDS
  qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 1024 -nodefaults \
    -display none -serial "file:$dir/console.log" \
    -device virtio-scsi-pci,id=scsihw0 \
    -drive "file=$dir/overlay.qcow2,if=none,id=drive-scsi0,format=qcow2" \
    -device scsi-hd,bus=scsihw0.0,drive=drive-scsi0,bootindex=100 \
    -drive "file=$dir/seed.iso,if=ide,media=cdrom,index=2" \
    -netdev "user,id=net0,hostfwd=tcp:127.0.0.1:$PORT-:22" \
    -device virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56 \
    -chardev "socket,id=qga0,path=$dir/qga.sock,server=on,wait=off" \
    -device virtio-serial,id=vs0 -device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0 \
    </dev/null >"$dir/qemu.log" 2>&1 &
  QEMU_PID=$!
  deadline=$((SECONDS + SSH_TIMEOUT))
  until guest true 2>/dev/null; do
    if ! kill -0 "$QEMU_PID" 2>/dev/null; then
      say "FAIL qemu exited"; cat "$dir/qemu.log"; tail -n 40 "$dir/console.log"; return 1
    fi
    if ((SECONDS > deadline)); then
      say "FAIL no SSH after ${SSH_TIMEOUT}s"; tail -n 60 "$dir/console.log"; return 1
    fi
    sleep 2
  done
  BOOT_SECONDS=$((SECONDS - t0))
  say "SSH up after ${BOOT_SECONDS}s ($(basename "$IMAGE"), $name)"
}

shutdown_vm() {
  local dir=$1 i
  guest sudo -n systemctl poweroff >/dev/null 2>&1 || true
  for ((i = 0; i < 60; i++)); do
    kill -0 "$QEMU_PID" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$QEMU_PID" 2>/dev/null; then
    say "WARN guest did not power off within 60s; killing qemu"
    kill "$QEMU_PID"
  fi
  wait "$QEMU_PID" 2>/dev/null || true
  QEMU_PID=""
  [[ -s $dir/console.log ]] || { say "FAIL serial console log is empty"; FAILED=1; }
}

# guest agent answers on its channel (host side), if python3 is available
qga_ping() {
  command -v python3 >/dev/null || return 0
  python3 - "$1" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(b'{"execute":"guest-sync","arguments":{"id":4242}}\n')
buf = b""
while b"\n" not in buf:
    buf += s.recv(4096)
sys.exit(0 if json.loads(buf.split(b"\n")[0]).get("return") == 4242 else 1)
EOF
}

# --- first boot: the full check ---------------------------------------------
D1=$WORK/vm1
boot "$D1" t1 || exit 1
pid1=$(guest ps -p 1 -o comm= || true)
check "PID 1 is systemd ($pid1)" test "$pid1" = systemd
status=$(guest cloud-init status --wait 2>/dev/null | tail -n1 || true)
check "cloud-init finished ($status)" test "$status" = "status: done"
if [[ $status != "status: done" ]]; then
  guest 'sudo -n cloud-init status --long; sudo -n grep -E "WARNING|ERROR|Traceback" /var/log/cloud-init.log | head -n 20' || true
fi
size=$(guest df -B1 --output=size / | tail -n1 | tr -d ' ')
check "root filesystem grew to the 8 GiB overlay ($((size / 1024 / 1024)) MiB)" test "$size" -gt $((7 * 1024 * 1024 * 1024))
qga=$(guest systemctl is-active qemu-guest-agent || true)
check "qemu-guest-agent is $qga" test "$qga" = active
check "guest agent answers guest-sync on its channel" qga_ping "$D1/qga.sock"
check "sudo -n true works for alice" guest sudo -n true
check "no 'debian' account (cloud-init user: alice replaced it)" guest '! getent passwd debian >/dev/null'
check "hostname is t1" test "$(guest hostname)" = t1
check "eth0 has 10.0.2.15/24" guest 'ip -4 -o addr show dev eth0 | grep -q "inet 10.0.2.15/24"'
check "root mounted by UUID" guest 'grep -Eq "^UUID=[^ ]+ +/ " /etc/fstab && ! grep -q "^/dev/" /etc/fstab'
# shellcheck disable=SC2016 # expanded in the guest
say "guest: $(guest '. /etc/os-release; echo "$PRETTY_NAME, kernel $(uname -r), $(ls /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | tr "\n" " ")"')"
t=$SECONDS apt_rc=0
guest sudo -n apt-get update -qq || apt_rc=$?
check "sudo apt-get update works in the guest ($((SECONDS - t))s)" test "$apt_rc" -eq 0
keys1=$(guest 'cat /etc/ssh/ssh_host_*_key.pub' | awk '{print $2}' | sort)
boot1=$BOOT_SECONDS
shutdown_vm "$D1"
check "guest powered off cleanly" grep -q "reboot: Power down" "$D1/console.log"

# --- second boot: host keys must be generated per instance --------------------
D2=$WORK/vm2
boot "$D2" t2 || exit 1
keys2=$(guest 'cat /etc/ssh/ssh_host_*_key.pub' | awk '{print $2}' | sort)
shutdown_vm "$D2"
check "SSH host keys present" test -n "$keys1"
check "SSH host keys differ between two instances" test -n "$keys2" -a "$keys1" != "$keys2" \
  -a -z "$(comm -12 <(echo "$keys1") <(echo "$keys2"))"

say "boot-to-SSH: ${boot1}s (first boot), ${BOOT_SECONDS}s (second boot)"
if ((FAILED)); then say "RESULT: FAIL"; exit 1; fi
say "RESULT: PASS"
