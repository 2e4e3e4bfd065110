#!/usr/bin/env bash
# QemuRun init scripts: Debian and Ubuntu (apt). Needs common.sh first, and from the
# OS file: QR_OS (debian or ubuntu) and QR_APT_SOURCES, the image's main source file
# (deb822 .sources on Debian 12+ and Ubuntu 24.04+, one-line sources.list before).

export DEBIAN_FRONTEND=noninteractive
# Ubuntu's needrestart would otherwise stop apt to ask which services to restart.
export NEEDRESTART_MODE=a NEEDRESTART_SUSPEND=1
export APT_LISTCHANGES_FRONTEND=none

# The OS account and its groups, as Debian's and Ubuntu's cloud.cfg define the default user.
QR_OS_USER=$QR_OS
if [[ $QR_OS == ubuntu ]]; then
  QR_OS_USER_GROUPS=(adm cdrom dip lxd sudo)
else
  QR_OS_USER_GROUPS=(adm audio cdrom dialout dip floppy netdev plugdev sudo video)
fi

QR_BASE_PACKAGES=(
  ca-certificates curl wget gnupg vim git htop jq unzip rsync tmux lsof bash-completion
  bind9-dnsutils net-tools tzdata locales qemu-guest-agent
)

qr_apt() {
  apt-get -q -y \
    -o DPkg::Lock::Timeout=600 \
    -o Acquire::Retries=3 \
    -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold \
    "$@"
}

# The mirror's URI for an official archive URI; any other URI comes back unchanged.
# Debian's cloud images name the archive through apt's mirror method, as
# mirror+file:///etc/apt/mirrors/debian.list (and debian-security.list).
qr_apt_map_uri() {
  local uri=$1 host path
  if [[ $QR_OS == debian && $uri =~ ^mirror\+file:///etc/apt/mirrors/(debian|debian-security)\.list$ ]]; then
    printf '%s/%s\n' "$QR_MIRROR" "${BASH_REMATCH[1]}"
    return 0
  fi
  if [[ $uri =~ ^https?://([^/]+)(/[^?#]*)?$ ]]; then
    host=${BASH_REMATCH[1]}
    path=${BASH_REMATCH[2]%/}
    case "$QR_OS $host $path" in
      "debian "*debian.org" /debian" | "debian "*debian.org" /debian-security")
        printf '%s%s\n' "$QR_MIRROR" "$path"
        return 0
        ;;
      "ubuntu "*ubuntu.com" /ubuntu")
        printf '%s/ubuntu/\n' "$QR_MIRROR"
        return 0
        ;;
    esac
  fi
  printf '%s\n' "$uri"
}

# Prints FILE with the official URIs of its `deb`/`deb-src` lines (one-line format) or
# `URIs:` fields (deb822) pointed at the mirror.
qr_apt_rewrite() {
  local file=$1 line head tail uri
  local -a uris mapped
  local list_re='^([[:space:]]*deb(-src)?[[:space:]]+(\[[^]]*\][[:space:]]+)?)([^[:space:]]+)(.*)$'
  local deb822_re='^([[:space:]]*URIs:[[:space:]]*)([^#]*[^#[:space:]])(.*)$'
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $file == *.sources && $line =~ $deb822_re ]]; then
      head=${BASH_REMATCH[1]} tail=${BASH_REMATCH[3]}
      read -r -a uris <<<"${BASH_REMATCH[2]}"
      mapped=()
      for uri in "${uris[@]}"; do
        mapped+=("$(qr_apt_map_uri "$uri")")
      done
      line="$head${mapped[*]}$tail"
    elif [[ $file != *.sources && $line =~ $list_re ]]; then
      head=${BASH_REMATCH[1]} uri=${BASH_REMATCH[4]} tail=${BASH_REMATCH[5]}
      line="$head$(qr_apt_map_uri "$uri")$tail"
    fi
    printf '%s\n' "$line"
  done <"$file"
}

qr_pkg_prepare() {
  local files=("$QR_APT_SOURCES")
  if [[ $QR_APT_SOURCES != /etc/apt/sources.list ]]; then
    files+=(/etc/apt/sources.list)
  fi
  if [[ -n $QR_MIRROR ]]; then
    qr_info "pointing apt at $QR_MIRROR ($QR_APT_SOURCES)"
  else
    qr_info "keeping the image's apt sources (QEMURUN_MIRROR is empty)"
  fi
  local file
  for file in "${files[@]}"; do
    qr_mirror_file "$file" qr_apt_rewrite || true
  done
  if [[ -n $QR_MIRROR ]]; then
    qr_require_mirror_in "${files[@]}"
  fi
  # A run cut off mid-install (its SSH session or worker died) can leave dpkg half done,
  # and then every apt-get refuses to run ("dpkg was interrupted") until it is finished.
  if [[ -d /var/lib/dpkg/updates ]] &&
    { [[ -n "$(ls -A /var/lib/dpkg/updates)" ]] || [[ -n "$(dpkg --audit 2>/dev/null)" ]]; }; then
    qr_info "finishing an interrupted package installation (dpkg --configure -a)"
    dpkg --configure -a --force-confdef --force-confold
  fi
  qr_info "refreshing package lists"
  qr_apt update
}

qr_pkg_refresh() {
  qr_apt update
}

qr_pkg_upgrade() {
  qr_apt dist-upgrade
}

qr_pkg_install() {
  qr_apt install "$@"
}

qr_pkg_missing() {
  local pkg
  for pkg in "$@"; do
    if [[ "$(dpkg-query --show --showformat='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

# The lists are a snapshot of the archive on the day the template was built; a clone
# that needs them fetches today's (qr_pkg_refresh).
qr_pkg_clean() {
  qr_apt clean
  rm -rf /var/lib/apt/lists/*
}

qr_configure_locale() {
  local charset
  qr_info "setting locale to $QR_LOCALE"
  case $QR_LOCALE in
    C | POSIX | C.*) ;; # built in, nothing to generate
    *)
      charset=${QR_LOCALE#*.}
      charset=${charset%%@*}
      qr_set_line /etc/locale.gen "^#?[[:space:]]*${QR_LOCALE//./\\.}[[:space:]]+${charset//./\\.}[[:space:]]*$" \
        "$QR_LOCALE $charset"
      if [[ $QR_OS == ubuntu ]]; then
        locale-gen "$QR_LOCALE"
      else
        locale-gen
      fi
      ;;
  esac
  update-locale "LANG=$QR_LOCALE"
}
