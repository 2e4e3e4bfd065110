#!/usr/bin/env bash
# Build a bootable Debian cloud image (qcow2) from Debian's archive with
# Debian's own tools, in the layout of Debian's "generic" images (the ones
# QemuRun downloads, debian-<n>-generic-amd64.qcow2):
#
#   GPT: p14 BIOS boot (3 MiB, GRUB core.img), p15 EFI system (124 MiB,
#   vfat, shim + signed GRUB), p1 root (ext4, rest of the 3 GiB disk).
#   GRUB from grub-cloud-amd64 boots under SeaBIOS (and OVMF); the root
#   filesystem is found by UUID, never by device name.
#
# Usage: build-guest-image.sh <11|12|13>
#   The last line on stdout is the absolute path of the qcow2 image.
#
# Images are cached outside the source tree, keyed by this script's content,
# the init script's package list (init-scripts/lib/debian-family.sh) and the
# Debian version:
#   ${QEMURUN_GUEST_IMAGE_CACHE:-/var/cache/qemurun/guest-images}   (root)
#   ${QEMURUN_GUEST_IMAGE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/qemurun/guest-images}
# Building needs root (the image's file ownership is written as is); other
# users can read a cache filled by root through QEMURUN_GUEST_IMAGE_CACHE.
#
# No loop devices or mounts are needed: the root filesystem is written with
# `mkfs.ext4 -d`, the ESP with mtools, and GRUB's boot sector and core image
# are placed the way grub-bios-setup places them.
set -euo pipefail

PROG=build-guest-image
SELF=$(readlink -f "${BASH_SOURCE[0]}")

DISK_SIZE=$((3 * 1024 * 1024 * 1024))
BIOS_START=2048 BIOS_SECTORS=6144    # p14, BIOS boot
ESP_START=8192 ESP_SECTORS=253952    # p15, EFI system
ROOT_START=262144                    # p1, root, up to the end of the disk
KERNEL_CMDLINE="console=tty0 console=ttyS0,115200 earlyprintk=ttyS0,115200 consoleblank=0 net.ifnames=0"

INIT_PACKAGES_FILE=$(dirname "$SELF")/../init-scripts/lib/debian-family.sh

die() { echo "$PROG: $*" >&2; exit 1; }

# QR_BASE_PACKAGES of the init script (one list, read from where the script keeps it).
init_script_packages() {
  sed -n '/^QR_BASE_PACKAGES=(/,/^)/p' "$INIT_PACKAGES_FILE" | sed '1s/^QR_BASE_PACKAGES=(//; $s/)$//' | tr -s ' \n' ' '
}
log() { echo "$PROG: $*" >&2; }

codename_of() {
  case "$1" in
    11) echo bullseye ;;
    12) echo bookworm ;;
    13) echo trixie ;;
    *) return 1 ;;
  esac
}

# ---------------------------------------------------------------------------
# Runs inside mmdebstrap (--customize-hook) with the root tree as "$rootfs".
customize_rootfs() {
  local ver=$1 codename=$2 root_uuid=$3 esp_uuid=$4 apt_conf=$5 rootfs=$6
  local r=$rootfs

  # The kernel is installed here rather than with --include so that a missing
  # metapackage file on the mirror can fall back to the ABI package it names.
  # Debian's generic images carry linux-image-amd64 (with AHCI and the other
  # hardware drivers); only the genericcloud ones carry linux-image-cloud-amd64.
  local kernel=linux-image-amd64
  local apt=(chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0
             --no-install-recommends install)
  if ! "${apt[@]}" "$kernel" >&2; then
    local abi
    abi=$(chroot "$r" apt-cache depends "$kernel" \
          | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
    [[ -n $abi ]] || die "cannot install $kernel"
    log "WARNING: the archive cannot serve $kernel; installing $abi, the kernel it depends on"
    "${apt[@]}" "$abi" >&2
  fi

  # apt sources in the layout of Debian's cloud images
  rm -f "$r/etc/apt/apt.conf.d/99mmdebstrap" "$r/etc/dpkg/dpkg.cfg.d/99mmdebstrap"
  if [[ $ver == 11 ]]; then
    cat > "$r/etc/apt/sources.list" <<EOF
deb http://deb.debian.org/debian $codename main
deb http://deb.debian.org/debian $codename-updates main
deb http://deb.debian.org/debian-security $codename-security main
EOF
  else
    rm -f "$r/etc/apt/sources.list"
    cat > "$r/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  if [[ -n $apt_conf ]]; then
    cp "$apt_conf" "$r/etc/apt/apt.conf.d/99qemurun-sandbox"
    chmod 0644 "$r/etc/apt/apt.conf.d/99qemurun-sandbox"
  fi

  # cloud-init sets LANG=en_US.UTF-8 on first boot; have it ready
  sed -i 's/^# *\(en_US.UTF-8 UTF-8\)/\1/' "$r/etc/locale.gen"
  chroot "$r" locale-gen >/dev/null
  echo LANG=en_US.UTF-8 > "$r/etc/default/locale"

  cat > "$r/etc/fstab" <<EOF
# <file system> <mount point> <type> <options> <dump> <pass>
UUID=$root_uuid / ext4 rw,discard,errors=remount-ro 0 1
UUID=$esp_uuid /boot/efi vfat defaults,nofail 0 0
EOF
  mkdir -p "$r/boot/efi"
  echo localhost > "$r/etc/hostname"
  cat > "$r/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1		localhost ip6-localhost ip6-loopback
ff02::1		ip6-allnodes
ff02::2		ip6-allrouters
EOF

  # networking: ifupdown + resolvconf (11, 12), netplan + networkd (13)
  if [[ $ver == 13 ]]; then
    ln -sfn ../run/systemd/resolve/stub-resolv.conf "$r/etc/resolv.conf"
  else
    mkdir -p "$r/etc/network/interfaces.d"
    cat > "$r/etc/network/interfaces" <<'EOF'
# This file describes the network interfaces available on your system
# and how to activate them. For more information, see interfaces(5).
# cloud-init writes the configuration to /etc/network/interfaces.d/.
source /etc/network/interfaces.d/*
EOF
    ln -sfn ../run/resolvconf/resolv.conf "$r/etc/resolv.conf"
  fi

  # sshd host keys are generated on first boot (cloud-init's cc_ssh); keep
  # `ssh-keygen -A` as a fallback for boots without a cloud-init datasource.
  rm -f "$r"/etc/ssh/ssh_host_*
  mkdir -p "$r/etc/systemd/system/ssh.service.d"
  cat > "$r/etc/systemd/system/ssh.service.d/host-keys.conf" <<'EOF'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
EOF

  # GRUB: configuration as Debian's cloud images have it
  mkdir -p "$r/etc/default/grub.d"
  cat > "$r/etc/default/grub.d/50-cloudimg.cfg" <<EOF
GRUB_TIMEOUT=1
GRUB_CMDLINE_LINUX="$KERNEL_CMDLINE"
GRUB_TERMINAL="console serial"
GRUB_SERIAL_COMMAND="serial --speed=115200"
EOF
  local kver
  kver=$(for f in "$r"/boot/vmlinuz-*; do echo "${f##*/vmlinuz-}"; done | sort -V | tail -n1)
  [[ -n $kver && -f $r/boot/initrd.img-$kver ]] || die "no kernel/initrd in the image"
  mkdir -p "$r/boot/grub/i386-pc"
  # Written once here; `update-grub` (run by every kernel install in the
  # guest through /etc/kernel/postinst.d/zz-update-grub) regenerates it.
  cat > "$r/boot/grub/grub.cfg" <<EOF
# Replaced by update-grub on the next kernel installation.
set default=0
set timeout=1
serial --speed=115200
terminal_input console serial
terminal_output console serial
insmod part_gpt
insmod ext2
search --no-floppy --fs-uuid --set=root $root_uuid
menuentry 'Debian GNU/Linux, with Linux $kver' {
	insmod gzio
	insmod part_gpt
	insmod ext2
	search --no-floppy --fs-uuid --set=root $root_uuid
	echo 'Loading Linux $kver ...'
	linux /boot/vmlinuz-$kver root=UUID=$root_uuid ro $KERNEL_CMDLINE
	echo 'Loading initial ramdisk ...'
	initrd /boot/initrd.img-$kver
}
EOF
  # What grub-install --target=i386-pc does, minus writing to a device:
  # modules in /boot/grub/i386-pc and a core.img that finds the root by UUID.
  cp "$r"/usr/lib/grub/i386-pc/*.mod "$r"/usr/lib/grub/i386-pc/*.lst \
     "$r/usr/lib/grub/i386-pc/boot.img" "$r/boot/grub/i386-pc/"
  cat > "$r/boot/grub/i386-pc/load.cfg" <<EOF
search.fs_uuid $root_uuid root hd0,gpt1
set prefix=(\$root)'/boot/grub'
EOF
  chroot "$r" grub-mkimage -O i386-pc -o /boot/grub/i386-pc/core.img \
    -c /boot/grub/i386-pc/load.cfg -p '(hd0,gpt1)/boot/grub' \
    biosdisk part_gpt ext2 search_fs_uuid
  chroot "$r" grub-editenv /boot/grub/grubenv create
  # grub-cloud-amd64 re-installs GRUB (BIOS + EFI) on the disk holding /boot
  # whenever the GRUB packages are upgraded inside the guest.
  touch "$r/etc/grub.d/enable_cloud"

  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r"/var/cache/debconf/*-old \
         "$r"/var/lib/dpkg/*-old "$r"/var/log/*.log "$r"/var/log/apt/* "$r"/var/lib/cloud
  : > "$r/etc/machine-id"
  rm -f "$r/var/lib/dbus/machine-id" "$r/var/lib/systemd/random-seed"
}

# ---------------------------------------------------------------------------
# Little-endian bytes of $1 on $2 bytes, as a printf %b escape string.
le_bytes() {
  local v=$1 n=$2 i out=""
  for ((i = 0; i < n; i++)); do out+=$(printf '\\x%02x' $(((v >> (8 * i)) & 0xff))); done
  printf '%s' "$out"
}
# put <file> <offset> <escaped bytes>
put() { printf '%b' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

# Embed GRUB's core.img into the BIOS boot partition and write boot.img into
# the MBR, with the same patches grub-bios-setup applies (no RS codes).
install_grub_bios() {
  local disk=$1 grubdir=$2 work=$3 core_sectors
  cp "$grubdir/core.img" "$work/core.img"
  cp "$grubdir/boot.img" "$work/boot.img"
  core_sectors=$((($(stat -c %s "$work/core.img") + 511) / 512))
  ((core_sectors <= BIOS_SECTORS)) || die "core.img too large for the BIOS boot partition"
  truncate -s $((core_sectors * 512)) "$work/core.img"
  # diskboot blocklist (last 12 bytes of the first sector): the rest of the
  # core image follows contiguously; the entry before it is the terminator.
  put "$work/core.img" $((0x1e8)) "$(le_bytes 0 12)"
  put "$work/core.img" $((0x1f4)) "$(le_bytes $((BIOS_START + 1)) 8)$(le_bytes $((core_sectors - 1)) 2)$(le_bytes $((0x820)) 2)"
  dd if="$work/core.img" of="$disk" bs=512 seek="$BIOS_START" conv=notrunc status=none
  # boot.img: keep the disk's BPB area; point it at core.img; boot drive
  # from the BIOS (0xff); disable the floppy drive check (2 x nop).
  dd if="$disk" of="$work/boot.img" bs=1 skip=3 seek=3 count=$((0x5a - 3)) conv=notrunc status=none
  put "$work/boot.img" $((0x5c)) "$(le_bytes "$BIOS_START" 8)"
  put "$work/boot.img" $((0x64)) '\xff'
  put "$work/boot.img" $((0x66)) '\x90\x90'
  # only the first 440 bytes: the disk signature and partition table stay
  dd if="$work/boot.img" of="$disk" bs=440 count=1 conv=notrunc status=none
}

# The ESP, as grub-install --uefi-secure-boot --force-extra-removable fills it.
make_esp() {
  local disk=$1 r=$2 esp_id=$3 work=$4 img="$1@@$((ESP_START * 512))"
  local shim=$r/usr/lib/shim/shimx64.efi.signed
  local grub=$r/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed
  local mm=$r/usr/lib/shim/mmx64.efi.signed
  [[ -f $shim && -f $grub ]] || die "shim/signed GRUB missing in the image"
  local msg
  msg=$(mkfs.fat -F 16 -n EFI -i "$esp_id" --offset "$ESP_START" "$disk" $((ESP_SECTORS / 2)) 2>&1) \
    || die "mkfs.fat failed: $msg"
  cat > "$work/esp-grub.cfg" <<EOF
search.fs_uuid $ROOT_UUID root hd0,gpt1
set prefix=(\$root)'/boot/grub'
configfile \$prefix/grub.cfg
EOF
  export MTOOLS_SKIP_CHECK=1
  mmd -i "$img" ::/EFI ::/EFI/debian ::/EFI/BOOT
  mcopy -i "$img" "$shim" ::/EFI/debian/shimx64.efi
  mcopy -i "$img" "$grub" ::/EFI/debian/grubx64.efi
  mcopy -i "$img" "$work/esp-grub.cfg" ::/EFI/debian/grub.cfg
  mcopy -i "$img" "$shim" ::/EFI/BOOT/BOOTX64.EFI
  mcopy -i "$img" "$grub" ::/EFI/BOOT/grubx64.efi
  mcopy -i "$img" "$work/esp-grub.cfg" ::/EFI/BOOT/grub.cfg
  if [[ -f $mm ]]; then
    mcopy -i "$img" "$mm" ::/EFI/debian/mmx64.efi
    mcopy -i "$img" "$mm" ::/EFI/BOOT/mmx64.efi
  fi
}

# ---------------------------------------------------------------------------
# Host packages missing for a build, one per line.
missing_host_packages() {
  local -A need=(
    [mmdebstrap]=mmdebstrap [qemu-img]=qemu-utils [sfdisk]=fdisk [mkfs.ext4]=e2fsprogs
    [mkfs.fat]=dosfstools [mcopy]=mtools [flock]=util-linux [sha512sum]=coreutils
  )
  local cmd
  for cmd in "${!need[@]}"; do
    PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 || echo "${need[$cmd]}"
  done | sort -u
  [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] || echo debian-archive-keyring
}

ensure_host_tools() {
  local missing
  mapfile -t missing < <(missing_host_packages)
  ((${#missing[@]} == 0)) && return 0
  log "installing host packages: ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

build_image() {
  local ver=$1 codename=$2 work=$3 out=$4
  local rootfs=$work/rootfs disk=$work/disk.raw img=debian-$ver-generic-amd64.qcow2
  local apt_conf="" aptopts=() pkgs
  ROOT_UUID=$(cat /proc/sys/kernel/random/uuid)
  local esp_id esp_uuid
  esp_id=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
  esp_uuid=$(printf '%s-%s' "${esp_id:0:4}" "${esp_id:4:4}" | tr 'a-f' 'A-F')

  if [[ -r /etc/apt/apt.conf.d/99artifact-registry ]]; then
    apt_conf=/etc/apt/apt.conf.d/99artifact-registry
    aptopts+=(--aptopt="$apt_conf")
  fi
  pkgs=(grub-cloud-amd64 initramfs-tools zstd systemd-sysv udev dbus
        locales procps iproute2 iputils-ping netbase openssh-server openssh-sftp-server cloud-init
        cloud-guest-utils fdisk e2fsprogs qemu-guest-agent sudo ca-certificates)
  # The packages QemuRun's init script installs are in the image already (Debian's own
  # images carry some of them), so that under emulation a real-guest install takes
  # minutes, not a quarter of an hour; the script still refreshes, upgrades and installs.
  local base
  read -r -a base <<<"$(init_script_packages)"
  pkgs+=("${base[@]}")
  if [[ $ver == 13 ]]; then
    pkgs+=(netplan.io systemd-resolved)
  else
    pkgs+=(ifupdown isc-dhcp-client resolvconf)
  fi

  local hook
  hook=$(printf '%q ' bash "$SELF" --customize-rootfs "$ver" "$codename" "$ROOT_UUID" "$esp_uuid" "$apt_conf")
  log "debian $ver ($codename): mmdebstrap"
  # unshare mode (also as root): the chroot's mounts live in a private mount
  # namespace and vanish with mmdebstrap, even if the build is killed
  mmdebstrap --mode=unshare --variant=apt --format=directory --components=main \
    "${aptopts[@]}" --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --include="$(IFS=,; echo "${pkgs[*]}")" \
    --customize-hook="$hook \"\$1\"" \
    "$codename" "$rootfs" \
    "deb http://deb.debian.org/debian $codename main" \
    "deb http://deb.debian.org/debian $codename-updates main" \
    "deb http://deb.debian.org/debian-security $codename-security main" >&2

  log "debian $ver: disk image"
  truncate -s "$DISK_SIZE" "$disk"
  (cd "$work" && sfdisk -q disk.raw >/dev/null) <<EOF
label: gpt
unit: sectors
first-lba: 2048
disk.raw14 : start=$BIOS_START, size=$BIOS_SECTORS, type=21686148-6449-6E6F-744E-656564454649
disk.raw15 : start=$ESP_START, size=$ESP_SECTORS, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B
disk.raw1 : start=$ROOT_START, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709
EOF
  local root_sectors
  root_sectors=$(sfdisk -d "$disk" | sed -n "s/.*start= *$ROOT_START, *size= *\([0-9]*\),.*/\1/p")
  [[ $root_sectors =~ ^[0-9]+$ ]] || die "cannot read the root partition size"
  # metadata_csum_seed and orphan_file are unknown to bullseye's e2fsck/GRUB
  mkfs.ext4 -q -F -b 4096 -L root -U "$ROOT_UUID" -O ^metadata_csum_seed,^orphan_file \
    -E offset=$((ROOT_START * 512)),nodiscard -d "$rootfs" "$disk" $((root_sectors / 8))
  make_esp "$disk" "$rootfs" "$esp_id" "$work"
  install_grub_bios "$disk" "$rootfs/boot/grub/i386-pc" "$work"

  log "debian $ver: qcow2"
  mkdir "$out"
  qemu-img convert -c -O qcow2 "$disk" "$out/$img"
  (cd "$out" && sha512sum "$img" > SHA512SUMS)
}

main() {
  if [[ ${1-} == --customize-rootfs ]]; then
    shift
    customize_rootfs "$@"
    return
  fi
  [[ $# -eq 1 ]] || die "usage: $0 <11|12|13>"
  local ver=$1 codename
  codename=$(codename_of "$ver") || die "unsupported Debian version '$ver' (use 11, 12 or 13)"

  local cache_root key dir img
  if [[ -n ${QEMURUN_GUEST_IMAGE_CACHE-} ]]; then
    cache_root=$QEMURUN_GUEST_IMAGE_CACHE
  elif [[ $(id -u) -eq 0 ]]; then
    cache_root=/var/cache/qemurun/guest-images
  else
    cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/qemurun/guest-images
  fi
  key=$({ cat "$SELF"; init_script_packages; printf '%s' "$ver"; } | sha256sum | cut -c1-16)
  dir=$cache_root/debian-$ver-$key
  img=$dir/debian-$ver-generic-amd64.qcow2
  if [[ -f $img && -f $dir/SHA512SUMS ]]; then
    readlink -f "$img"
    return
  fi

  if [[ $(id -u) -ne 0 ]]; then
    local missing
    missing=$(missing_host_packages | tr '\n' ' ')
    die "debian-$ver is not in $cache_root; building it needs root${missing:+ and the host packages: ${missing% }} (or point QEMURUN_GUEST_IMAGE_CACHE at a cache a root build filled)"
  fi

  mkdir -p "$cache_root"
  cache_root=$(readlink -f "$cache_root")
  dir=$cache_root/debian-$ver-$key
  img=$dir/debian-$ver-generic-amd64.qcow2
  exec 9>"$cache_root/.debian-$ver.lock"
  flock 9
  if [[ ! -f $img || ! -f $dir/SHA512SUMS ]]; then
    ensure_host_tools
    # leftovers of interrupted builds of this version (we hold its lock)
    local stale
    for stale in "$cache_root/.build-debian-$ver-"*; do
      [[ -d $stale ]] && rm -rf --one-file-system "$stale"
    done
    [[ -e $dir ]] && rm -rf "$dir"
    WORK=$(mktemp -d "$cache_root/.build-debian-$ver-XXXXXX")
    chmod 0755 "$WORK"    # apt's _apt user downloads into the tree
    trap 'rm -rf --one-file-system "$WORK"' EXIT
    trap 'exit 130' INT TERM HUP
    local t0=$SECONDS
    build_image "$ver" "$codename" "$WORK" "$WORK/out"
    mv -T "$WORK/out" "$dir"
    log "debian $ver: built in $((SECONDS - t0)) s, $(du -h "$img" | cut -f1)"
  fi
  readlink -f "$img"
}

main "$@"
