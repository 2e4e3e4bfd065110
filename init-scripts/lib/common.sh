#!/usr/bin/env bash
# QemuRun init scripts: the part shared by every OS/version.
#
# Not run on its own: each init-scripts/<os>_<version>.sh sets the OS identity, pulls in
# this file and its family file (debian-family.sh or rhel-family.sh), and calls qr_main.
# lib/initScripts.ts inlines those files into one self-contained script, because the
# script reaches the VM as one text on stdin (`sudo bash -s`) and the VM fetches nothing.
#
# Settings, all from the environment (an unset or empty value takes the default):
#   QEMURUN_ROOT_PASSWORD  root password. Unset or empty: root's password is locked (log in
#                          with a key). Never printed.
#   QEMURUN_ROOT_PASSWORD_HASH  root password as a crypt hash ($5$…, $6$…, $y$…), set with
#                          `chpasswd -e`; wins over QEMURUN_ROOT_PASSWORD. What QemuRun
#                          sends, so the plain password never reaches the VM.
#   QEMURUN_MIRROR         mirror root URL, e.g. http://ftp.example.org; the scripts use
#                          <mirror>/debian and <mirror>/debian-security, <mirror>/ubuntu,
#                          <mirror>/rocky and <mirror>/epel. Empty keeps (or restores) the
#                          image's own package sources.
#   QEMURUN_PACKAGES       extra packages, space-separated; each must match
#                          ^[a-z0-9][a-z0-9+._-]*$
#   QEMURUN_TIMEZONE       default UTC
#   QEMURUN_LOCALE         default en_US.UTF-8 (Debian and Ubuntu; Rocky keeps the image's)
#   QEMURUN_SWAP_SIZE      swap file size, e.g. 2G or 512M (default 2G); 0 removes it
#   QEMURUN_PHASE          what part of the work to do (default full); for golden
#                          templates and their clones (docs/init-scripts.md):
#                          full      everything below, on a VM built from an image
#                          template  what every VM of the OS version shares: package
#                                    sources, upgrade, base packages and QEMURUN_PACKAGES,
#                                    locale, sysctl, guest agent, the marker; no account,
#                                    no root password, no time zone, no swap
#                          seal      cleans a template VM for cloning, right before it is
#                                    shut down and converted: cloud-init state, machine-id,
#                                    SSH host keys, logs, shell history, package lists
#                          clone     the per-VM part on a clone of a template: accounts,
#                                    root password, time zone, swap, and only the packages
#                                    still missing; without the template's marker of this
#                                    script version it runs full instead
#
# Safe to run twice: every edit rewrites a whole file or a keyed line, so nothing is
# duplicated, and the settings are applied again on every run. The marker file
# /var/lib/qemurun/init-done holds the version of the last script that finished a full or
# template run; when it equals this script's version, the full package upgrade (the slow
# step) is skipped, and a clone skips the package work altogether. Delete the marker to
# force the upgrade. Runs take turns on /var/lib/qemurun/init.lock (qr_take_turn).

set -Eeuo pipefail
umask 022

QR_SCRIPT_VERSION=dev # qemurun:version (lib/initScripts.ts puts the real version here)
QR_STATE_DIR=/var/lib/qemurun
QR_MARKER="$QR_STATE_DIR/init-done"
QR_LOCK_FILE="$QR_STATE_DIR/init.lock"
# Long enough for an earlier run's full upgrade under emulation.
QR_TURN_WAIT_SEC=1800
# Copies of package source files as the image shipped them, to rewrite from or restore.
QR_ORIG_DIR="$QR_STATE_DIR/orig"
QR_SYSCTL_FILE=/etc/sysctl.d/90-qemurun.conf
QR_CLONE_CLOUD_CFG=/etc/cloud/cloud.cfg.d/90-qemurun-clone.cfg
QR_MODULES_FILE=/etc/modules-load.d/qemurun.conf
QR_SWAP_FILE=/swapfile
QR_PACKAGE_RE='^[a-z0-9][a-z0-9+._-]*$'

qr_info() { printf '[*] %s\n' "$*"; }
qr_ok() { printf '[+] %s\n' "$*"; }
qr_fail() { printf '[-] %s\n' "$*" >&2; }

qr_on_error() {
  qr_fail "init script failed (exit $1) at line $2: $3"
}

# ---------------------------------------------------------------------------------------
# Settings

# Reads and checks every setting before anything changes; exits 2 naming each bad one.
qr_read_settings() {
  local problems=() problem pkg
  QR_ROOT_PASSWORD=${QEMURUN_ROOT_PASSWORD:-}
  QR_ROOT_PASSWORD_HASH=${QEMURUN_ROOT_PASSWORD_HASH:-}
  # Keep the password out of the environment of every command this script starts.
  unset QEMURUN_ROOT_PASSWORD QEMURUN_ROOT_PASSWORD_HASH
  if [[ $QR_ROOT_PASSWORD == *[$'\n\r']* ]]; then
    problems+=("QEMURUN_ROOT_PASSWORD must be one line")
  fi
  if [[ -n $QR_ROOT_PASSWORD_HASH && ! $QR_ROOT_PASSWORD_HASH =~ ^\$[0-9a-z]+\$[A-Za-z0-9./=\$]+$ ]]; then
    problems+=("QEMURUN_ROOT_PASSWORD_HASH must be a crypt hash like \$5\$salt\$hash")
  fi

  QR_MIRROR=${QEMURUN_MIRROR:-}
  while [[ $QR_MIRROR == */ ]]; do QR_MIRROR=${QR_MIRROR%/}; done
  if [[ -n $QR_MIRROR && ! $QR_MIRROR =~ ^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+/-]*)?$ ]]; then
    problems+=("QEMURUN_MIRROR must be an http(s) URL without query or spaces: '$QR_MIRROR'")
  fi

  QR_TIMEZONE=${QEMURUN_TIMEZONE:-UTC}
  if [[ ! $QR_TIMEZONE =~ ^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$ ]] ||
    { [[ -d /usr/share/zoneinfo ]] && [[ ! -f /usr/share/zoneinfo/$QR_TIMEZONE ]]; }; then
    problems+=("QEMURUN_TIMEZONE is not a known time zone: '$QR_TIMEZONE'")
  fi

  QR_LOCALE=${QEMURUN_LOCALE:-en_US.UTF-8}
  if [[ ! $QR_LOCALE =~ ^(C|POSIX|C\.UTF-8|C\.utf8|[a-z]{2,3}_[A-Z]{2}\.[A-Za-z0-9-]+(@[a-z]+)?)$ ]]; then
    problems+=("QEMURUN_LOCALE must look like en_US.UTF-8: '$QR_LOCALE'")
  fi

  QR_SWAP_SIZE=${QEMURUN_SWAP_SIZE:-2G}
  if [[ ! $QR_SWAP_SIZE =~ ^(0|[1-9][0-9]*[MG])$ ]]; then
    problems+=("QEMURUN_SWAP_SIZE must be 0 or a size like 2G or 512M: '$QR_SWAP_SIZE'")
  fi

  QR_PHASE=${QEMURUN_PHASE:-full}
  case $QR_PHASE in
    full | template | seal | clone) ;;
    *) problems+=("QEMURUN_PHASE must be full, template, seal or clone: '$QR_PHASE'") ;;
  esac

  QR_PACKAGES=()
  read -r -d '' -a QR_PACKAGES <<<"${QEMURUN_PACKAGES:-}" || true
  for pkg in "${QR_PACKAGES[@]}"; do
    if [[ ! $pkg =~ $QR_PACKAGE_RE ]]; then
      problems+=("QEMURUN_PACKAGES: invalid package name '$pkg'")
    fi
  done

  if ((${#problems[@]} > 0)); then
    for problem in "${problems[@]}"; do qr_fail "$problem"; done
    qr_fail "nothing was changed"
    exit 2
  fi
}

qr_require_root() {
  if ((EUID != 0)); then
    qr_fail "must run as root, e.g. sudo bash -s < ${QR_OS}_${QR_VERSION}.sh"
    exit 1
  fi
}

# Prints the value of KEY in /etc/os-release, without quotes.
qr_os_release() {
  local key=$1 line value
  [[ -f /etc/os-release ]] || return 0
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line == "$key="* ]]; then
      value=${line#*=}
      value=${value#[\"\']}
      value=${value%[\"\']}
      printf '%s\n' "$value"
      return 0
    fi
  done </etc/os-release
}

# Refuses to run a script on another OS or release (Rocky's VERSION_ID is e.g. 9.4).
qr_check_os() {
  local id version
  id=$(qr_os_release ID)
  version=$(qr_os_release VERSION_ID)
  if [[ $id != "$QR_OS_RELEASE_ID" ]] || [[ $version != "$QR_VERSION" && ${version%%.*} != "$QR_VERSION" ]]; then
    qr_fail "this script is for $QR_OS $QR_VERSION, but /etc/os-release says '$id' '$version'"
    exit 1
  fi
}

# ---------------------------------------------------------------------------------------
# File edits. Each one writes a whole file, so running it again changes nothing.

# qr_put_file PATH MODE CONTENT: makes PATH hold CONTENT plus a final newline. An existing
# file keeps its mode (MODE is for new files) and is left untouched when already right.
qr_put_file() {
  local path=$1 mode=$2 content=$3 dir tmp
  if [[ -f $path ]] && [[ "$(<"$path")" == "$content" ]]; then
    return 0
  fi
  dir=$(dirname "$path")
  mkdir -p "$dir"
  tmp=$(mktemp "$dir/.qemurun.XXXXXX")
  printf '%s\n' "$content" >"$tmp"
  if [[ -f $path ]]; then
    chmod --reference="$path" "$tmp"
  else
    chmod "$mode" "$tmp"
  fi
  mv -f "$tmp" "$path"
}

# qr_set_line FILE REGEX [LINE]: the first line matching REGEX becomes LINE, later matches
# are dropped, and LINE is appended when nothing matched. Without LINE, matches are removed.
qr_set_line() {
  local path=$1 re=$2 new=${3-} line placed=0
  local out=()
  if [[ -f $path ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
      if [[ $line =~ $re ]]; then
        if ((!placed)) && [[ -n $new ]]; then
          out+=("$new")
          placed=1
        fi
        continue
      fi
      out+=("$line")
    done <"$path"
  fi
  if ((!placed)) && [[ -n $new ]]; then
    out+=("$new")
  fi
  qr_put_file "$path" 644 "$(printf '%s\n' "${out[@]}")"
}

# qr_mirror_file PATH FUNCTION: points one package source file at QR_MIRROR. FUNCTION
# prints the mirrored version of the file it is given. The image's original is kept under
# QR_ORIG_DIR and always rewritten from, so a changed mirror replaces the old one and an
# empty mirror restores the original. Returns 1 when the file is absent.
qr_mirror_file() {
  local path=$1 rewrite=$2 orig="$QR_ORIG_DIR$1" src new
  if [[ -f $orig ]]; then
    src=$orig
  elif [[ -f $path ]]; then
    src=$path
  else
    return 1
  fi
  if [[ -z $QR_MIRROR ]]; then
    if [[ $src == "$orig" ]]; then
      qr_put_file "$path" 644 "$(<"$orig")"
    fi
    return 0
  fi
  new=$("$rewrite" "$src")
  if [[ $src == "$path" && $new == "$(<"$path")" ]]; then
    return 0 # nothing in it that the mirror serves
  fi
  if [[ ! -f $orig ]]; then
    mkdir -p "$(dirname "$orig")"
    cp -p "$path" "$orig"
  fi
  qr_put_file "$path" 644 "$new"
}

# Fails unless one of the given files now names the mirror.
qr_require_mirror_in() {
  local path
  for path in "$@"; do
    if [[ -f $path ]] && [[ "$(<"$path")" == *"$QR_MIRROR"* ]]; then
      return 0
    fi
  done
  qr_fail "found no official package source to point at $QR_MIRROR in: $*"
  return 1
}

# ---------------------------------------------------------------------------------------
# Steps shared by every OS

# Lets cloud-init finish first: it may still be creating users or running apt/dnf.
qr_wait_for_cloud_init() {
  # cloud-init links result.json into /run (fresh every boot) when its last stage of this
  # boot is done: then there is nothing to wait for, and no second Python start (seconds
  # under emulation) after QemuRun's own wait for cloud-init.
  if [[ -e /run/cloud-init/result.json ]]; then
    return 0
  fi
  if command -v cloud-init >/dev/null 2>&1; then
    qr_info "waiting for cloud-init to finish"
    cloud-init status --wait >/dev/null 2>&1 || true
  fi
}

# The OS's own account (debian, ubuntu, rocky) accepts the same keys as the account the
# install logs in with. cloud-init's `user: <name>` (what Proxmox writes for `ciuser`)
# renames the OS's default account instead of adding one, so on a real guest with a custom
# user the OS account does not exist: create it as cloud-init makes its default user (its
# groups, passwordless sudo) with the login user's authorized keys. Nothing to do when
# the install logs in as the OS account itself.
qr_ensure_os_account() {
  local login=${SUDO_USER:-} home group
  local groups=() args=(--create-home --shell /bin/bash)
  if [[ -z $login || $login == root || $login == "$QR_OS_USER" ]]; then
    return 0
  fi
  if ! id -u "$QR_OS_USER" >/dev/null 2>&1; then
    qr_info "creating the $QR_OS account $QR_OS_USER beside $login"
    for group in "${QR_OS_USER_GROUPS[@]}"; do
      if getent group "$group" >/dev/null; then
        groups+=("$group")
      fi
    done
    if ((${#groups[@]} > 0)); then
      args+=(--groups "$(IFS=,; printf '%s' "${groups[*]}")")
    fi
    useradd "${args[@]}" "$QR_OS_USER"
  fi
  # Where useradd is only recorded (the process guests of QemuRun's sandbox) there is no
  # account to give keys to.
  if id -u "$QR_OS_USER" >/dev/null 2>&1; then
    home=$(getent passwd "$login" | cut -d: -f6)
    if [[ -f $home/.ssh/authorized_keys ]]; then
      qr_info "giving $QR_OS_USER the keys of $login"
      install -d -m 700 -o "$QR_OS_USER" -g "$(id -gn "$QR_OS_USER")" "$(getent passwd "$QR_OS_USER" | cut -d: -f6)/.ssh"
      install -m 600 -o "$QR_OS_USER" -g "$(id -gn "$QR_OS_USER")" "$home/.ssh/authorized_keys" \
        "$(getent passwd "$QR_OS_USER" | cut -d: -f6)/.ssh/authorized_keys"
    fi
    qr_put_file /etc/sudoers.d/90-qemurun-os-account 440 "# Managed by the QemuRun init script: the OS account, as cloud-init makes it.
$QR_OS_USER ALL=(ALL) NOPASSWD:ALL"
  fi
}

qr_set_root_password() {
  if [[ -n $QR_ROOT_PASSWORD_HASH ]]; then
    qr_info "setting root password (from its crypt hash)"
    printf 'root:%s\n' "$QR_ROOT_PASSWORD_HASH" | chpasswd -e
    return
  fi
  if [[ -z $QR_ROOT_PASSWORD ]]; then
    # No well-known default: a password everyone can read in this script is no password.
    qr_info "QEMURUN_ROOT_PASSWORD is not set: locking root's password (key login only)"
    passwd -l root >/dev/null
    return
  fi
  qr_info "setting root password"
  # printf is a shell builtin: the password reaches chpasswd on stdin, never in an argv.
  printf 'root:%s\n' "$QR_ROOT_PASSWORD" | chpasswd
}

# Existing accounts get a minimum password age no one reaches; new accounts inherit it
# from login.defs. Root can still set any password.
qr_lock_password_changes() {
  qr_info "stopping users from changing their passwords"
  qr_set_line /etc/login.defs '^[[:space:]]*PASS_MIN_DAYS([[:space:]]|$)' $'PASS_MIN_DAYS\t99999'
  local name uid
  while IFS=: read -r -u 3 name _ uid _; do
    if [[ $uid =~ ^[0-9]+$ ]] && ((uid >= 1000 && uid < 65534)); then
      chage --mindays 99999 "$name"
    fi
  done 3</etc/passwd
}

qr_set_timezone() {
  qr_info "setting timezone to $QR_TIMEZONE"
  timedatectl set-timezone "$QR_TIMEZONE"
}

qr_tune_sysctl() {
  qr_info "tuning sysctl ($QR_SYSCTL_FILE)"
  qr_put_file "$QR_MODULES_FILE" 644 "# Managed by the QemuRun init script.
tcp_bbr"
  qr_put_file "$QR_SYSCTL_FILE" 644 "# Managed by the QemuRun init script; rewritten on every run.
vm.swappiness = 10
vm.vfs_cache_pressure = 50
fs.file-max = 2097152
fs.inotify.max_user_watches = 524288
fs.inotify.max_user_instances = 1024
net.core.somaxconn = 4096
net.core.netdev_max_backlog = 16384
net.ipv4.tcp_max_syn_backlog = 8192
net.ipv4.ip_local_port_range = 10240 65535
net.ipv4.tcp_fastopen = 3
net.ipv4.tcp_mtu_probing = 1
net.core.default_qdisc = fq
net.ipv4.tcp_congestion_control = bbr"
  # A key the running kernel lacks should not fail the install; the file applies at boot.
  if ! sysctl --system >/dev/null; then
    qr_info "warning: sysctl --system reported errors; settings apply again at boot"
  fi
}

qr_swap_active() {
  local file _
  [[ -r /proc/swaps ]] || return 1
  while read -r file _; do
    if [[ $file == "$QR_SWAP_FILE" ]]; then
      return 0
    fi
  done </proc/swaps
  return 1
}

qr_size_bytes() {
  local n=${1%[MG]}
  case $1 in
    *G) printf '%s\n' $((n * 1024 * 1024 * 1024)) ;;
    *M) printf '%s\n' $((n * 1024 * 1024)) ;;
    *) printf '%s\n' "$n" ;;
  esac
}

# One swap file, one fstab line. A file of the right size is kept; another size is
# replaced; size 0 removes both. The file is built under a temporary name and renamed, so
# an interrupted run never leaves a half-made swap file behind.
qr_configure_swap() {
  local fstab_re="^[[:space:]]*${QR_SWAP_FILE}[[:space:]]"
  if [[ $QR_SWAP_SIZE == 0 ]]; then
    qr_info "removing swap file (QEMURUN_SWAP_SIZE=0)"
    if qr_swap_active; then
      swapoff "$QR_SWAP_FILE"
    fi
    qr_set_line /etc/fstab "$fstab_re"
    rm -f "$QR_SWAP_FILE"
    return 0
  fi
  qr_info "adding a $QR_SWAP_SIZE swap file"
  if [[ ! -f $QR_SWAP_FILE ]] || [[ $(stat -c %s "$QR_SWAP_FILE") != "$(qr_size_bytes "$QR_SWAP_SIZE")" ]]; then
    if qr_swap_active; then
      swapoff "$QR_SWAP_FILE"
    fi
    rm -f "$QR_SWAP_FILE" "$QR_SWAP_FILE.new"
    fallocate -l "$QR_SWAP_SIZE" "$QR_SWAP_FILE.new"
    chmod 600 "$QR_SWAP_FILE.new"
    mkswap "$QR_SWAP_FILE.new" >/dev/null
    mv -f "$QR_SWAP_FILE.new" "$QR_SWAP_FILE"
  else
    qr_info "swap file $QR_SWAP_FILE already has that size"
  fi
  qr_set_line /etc/fstab "$fstab_re" "$QR_SWAP_FILE none swap sw 0 0"
  if ! qr_swap_active; then
    swapon "$QR_SWAP_FILE"
  fi
}

qr_enable_guest_agent() {
  qr_info "enabling qemu-guest-agent"
  # Debian and Ubuntu ship the unit without an [Install] section (udev starts it); there
  # enabling can fail, and starting it is all there is to do.
  if ! systemctl enable --now qemu-guest-agent; then
    systemctl start qemu-guest-agent
  fi
}

# ---------------------------------------------------------------------------------------
# Sealing: what makes one VM many. Every step leaves the running session working (the
# product shuts the VM down right after): sshd keeps the keys it loaded, systemd and
# journald the machine-id they read at boot.

# A clone's cloud-init drive carries a new instance-id (Proxmox derives it from the
# user-data and network-config, and a clone has a new MAC and name), so cloud-init runs
# its per-instance modules again: the account and keys, the host keys, the hostname. Its
# own state is cleared too, so nothing of the template's instance is left to confuse it.
# `--seed` is not in every release; `--machine-id` only in newer ones (done below by hand).
qr_seal_cloud_init() {
  local args=(clean --logs)
  if ! command -v cloud-init >/dev/null 2>&1; then
    qr_info "no cloud-init on this image: no cloud-init state to clean"
    return 0
  fi
  if [[ "$(cloud-init clean --help 2>&1)" == *--seed* ]]; then
    args+=(--seed)
  fi
  qr_info "cleaning cloud-init's state and logs (cloud-init ${args[*]})"
  cloud-init "${args[@]}"
  # grub-dpkg runs once per instance, so on every clone's first boot (seconds of grub-probe
  # under emulation, on the path to a usable VM) to record the boot disk for grub-pc's
  # upgrades in debconf. This template recorded it on its own first boot, and a clone boots
  # from the same scsi0, so the recorded disk holds for every clone. A clone's user-data
  # can still turn it on: user-data overrides cloud.cfg.d.
  qr_info "clones keep the template's grub install device: grub-dpkg off ($QR_CLONE_CLOUD_CFG)"
  qr_put_file "$QR_CLONE_CLOUD_CFG" 644 "$(printf '%s\n' \
    '# Written by the QemuRun init script when this VM was sealed as a template.' \
    '# The template recorded grub-pc/install_devices; its clones boot from the same disk.' \
    'grub_dpkg:' \
    '  enabled: false')"
}

# Emptied, not deleted: with an empty /etc/machine-id systemd takes the boot for a first
# boot and writes a new ID (systemd-machine-id-setup); a missing file would make some
# releases boot without one. D-Bus's copy, where it is a file of its own, would keep the
# old ID, so it becomes the link to /etc/machine-id that current releases ship.
qr_seal_machine_id() {
  qr_info "emptying /etc/machine-id: each clone makes its own on its first boot"
  : >/etc/machine-id
  if [[ -f /var/lib/dbus/machine-id && ! -L /var/lib/dbus/machine-id ]]; then
    ln -sf /etc/machine-id /var/lib/dbus/machine-id
  fi
  # Clones would otherwise start from the same entropy seed and DHCP leases.
  rm -f /var/lib/systemd/random-seed /var/lib/dhcp/*.leases /var/lib/NetworkManager/*.lease
}

qr_seal_host_keys() {
  qr_info "removing the SSH host keys: cloud-init makes new ones on each clone"
  rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub
}

qr_seal_logs() {
  local home
  qr_info "removing shell history and clearing logs"
  rm -f /root/.bash_history
  for home in /home/*; do
    rm -f "$home/.bash_history"
  done
  if command -v journalctl >/dev/null 2>&1; then
    journalctl --rotate >/dev/null 2>&1 || true
    journalctl --vacuum-time=1s >/dev/null 2>&1 || true
  fi
  if [[ -d /var/log ]]; then
    # Rotated files go; the live ones are emptied in place (their owners keep them open).
    # The journal's own files are journalctl's to remove.
    find /var/log -path /var/log/journal -prune -o -type f \( -name '*.gz' -o -name '*.[0-9]' -o -name '*.old' \) -exec rm -f {} +
    find /var/log -path /var/log/journal -prune -o -type f -exec truncate -s 0 {} +
  fi
}

# ---------------------------------------------------------------------------------------
# The OS family file defines: qr_pkg_prepare (mirror + metadata), qr_pkg_refresh
# (metadata only), qr_pkg_upgrade, qr_pkg_install PACKAGE..., qr_pkg_missing PACKAGE...
# (prints those not installed), qr_pkg_clean (caches and metadata), qr_configure_locale,
# and the array QR_BASE_PACKAGES.

# The upgrade runs once per script version: a second run, or a template's, skips it.
qr_upgrade_once() {
  if [[ -f $QR_MARKER ]] && [[ "$(<"$QR_MARKER")" == "$QR_SCRIPT_VERSION" ]]; then
    qr_info "skipping the full upgrade: this script version already finished here ($QR_MARKER)"
  else
    qr_info "upgrading packages"
    qr_pkg_upgrade
  fi
}

qr_phase_full() {
  qr_wait_for_cloud_init
  qr_ensure_os_account
  qr_set_root_password
  qr_lock_password_changes
  qr_pkg_prepare
  qr_upgrade_once
  qr_info "installing packages: ${QR_BASE_PACKAGES[*]} ${QR_PACKAGES[*]}"
  qr_pkg_install "${QR_BASE_PACKAGES[@]}" "${QR_PACKAGES[@]}"
  qr_set_timezone
  qr_configure_locale
  qr_tune_sysctl
  qr_configure_swap
  qr_enable_guest_agent
  qr_put_file "$QR_MARKER" 644 "$QR_SCRIPT_VERSION"
}

# What every VM of this OS version shares; nothing tied to one VM or its user.
qr_phase_template() {
  qr_wait_for_cloud_init
  qr_pkg_prepare
  qr_upgrade_once
  qr_info "installing packages: ${QR_BASE_PACKAGES[*]} ${QR_PACKAGES[*]}"
  qr_pkg_install "${QR_BASE_PACKAGES[@]}" "${QR_PACKAGES[@]}"
  qr_configure_locale
  qr_tune_sysctl
  qr_enable_guest_agent
  qr_put_file "$QR_MARKER" 644 "$QR_SCRIPT_VERSION"
}

# The marker stays: it is how a clone knows what its template already did.
qr_phase_seal() {
  qr_wait_for_cloud_init
  qr_seal_cloud_init
  qr_info "removing package caches and lists (a clone refreshes them when it installs)"
  qr_pkg_clean
  qr_seal_machine_id
  qr_seal_host_keys
  qr_seal_logs
  sync
}

# The per-VM part, on a clone of a template this script version made.
qr_phase_clone() {
  local missing=()
  qr_info "template made by this script version ($QR_MARKER): skipping package sources, the upgrade and the base packages"
  qr_wait_for_cloud_init
  qr_ensure_os_account
  qr_set_root_password
  qr_lock_password_changes
  if ((${#QR_PACKAGES[@]} > 0)); then
    mapfile -t missing < <(qr_pkg_missing "${QR_PACKAGES[@]}")
  fi
  if ((${#missing[@]} > 0)); then
    qr_info "refreshing package metadata (the template was sealed without it)"
    qr_pkg_refresh
    qr_info "installing packages the template lacks: ${missing[*]}"
    qr_pkg_install "${missing[@]}"
  elif ((${#QR_PACKAGES[@]} > 0)); then
    qr_info "every package is on the template already: ${QR_PACKAGES[*]}"
  fi
  qr_set_timezone
  qr_configure_swap
}

# Why a clone cannot take the fast path, or nothing when it can.
qr_clone_fallback_reason() {
  local found
  if [[ ! -f $QR_MARKER ]]; then
    printf '%s\n' "no template marker ($QR_MARKER)"
    return 0
  fi
  found=$(<"$QR_MARKER")
  if [[ $found != "$QR_SCRIPT_VERSION" ]]; then
    [[ $found =~ ^[A-Za-z0-9._-]{1,64}$ ]] || found=unreadable
    printf '%s\n' "the template was made by script version $found, this is $QR_SCRIPT_VERSION"
  fi
}

# A run whose SSH session died with its worker can go on in the guest for a while (apt
# under way), and the retry would start beside it: two apt-get runs collide on apt's locks
# (`apt-get update` does not wait for the lists lock; it exits 100). So runs take turns,
# on a lock the kernel drops when its holder exits, however it ends.
qr_take_turn() {
  mkdir -p "$QR_STATE_DIR"
  exec 9>"$QR_LOCK_FILE"
  if ! flock -n 9; then
    qr_info "waiting for an earlier run of this script to finish ($QR_LOCK_FILE)"
    if ! flock -w "$QR_TURN_WAIT_SEC" 9; then
      qr_fail "an earlier run of this script still holds $QR_LOCK_FILE after ${QR_TURN_WAIT_SEC}s"
      exit 1
    fi
  fi
}

qr_main() {
  local started=$SECONDS phase reason
  trap 'qr_on_error "$?" "$LINENO" "$BASH_COMMAND"' ERR
  qr_read_settings
  phase=$QR_PHASE
  if [[ $phase == full ]]; then
    qr_info "QemuRun init script $QR_SCRIPT_VERSION for $QR_OS $QR_VERSION"
  else
    qr_info "QemuRun init script $QR_SCRIPT_VERSION for $QR_OS $QR_VERSION, phase $phase"
  fi
  qr_require_root
  qr_check_os
  qr_take_turn
  if [[ $phase == clone ]]; then
    reason=$(qr_clone_fallback_reason)
    if [[ -n $reason ]]; then
      qr_info "running the full script instead of the clone phase: $reason"
      phase=full
    fi
  fi
  "qr_phase_$phase"
  qr_ok "init script finished in $((SECONDS - started))s"
}
