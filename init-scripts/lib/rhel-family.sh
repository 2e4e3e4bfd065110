#!/usr/bin/env bash
# QemuRun init scripts: Rocky Linux (dnf). Needs common.sh first. Adds EPEL, as the seed
# did; with a mirror set, EPEL comes from <mirror>/epel and Rocky from <mirror>/rocky.

# The OS account and its groups, as Rocky's cloud.cfg defines the default user.
QR_OS_USER=rocky
QR_OS_USER_GROUPS=(adm systemd-journal wheel)

# No curl: the images ship curl-minimal, which conflicts with the curl package.
QR_BASE_PACKAGES=(
  wget vim-enhanced git jq unzip rsync tmux lsof bash-completion bind-utils tar htop
  qemu-guest-agent
)

qr_dnf() {
  dnf -y "$@"
}

# Prints the mirror's URL for an official baseurl (Rocky or EPEL), or nothing.
qr_rhel_map_url() {
  local url=$1 host path
  [[ $url =~ ^https?://([^/]+)/(.*)$ ]] || return 0
  host=${BASH_REMATCH[1]}
  path=${BASH_REMATCH[2]}
  case "$host $path" in
    "dl.rockylinux.org \$contentdir/"*) printf '%s/rocky/%s\n' "$QR_MIRROR" "${path#*/}" ;;
    "dl.rockylinux.org pub/rocky/"*) printf '%s/rocky/%s\n' "$QR_MIRROR" "${path#pub/rocky/}" ;;
    "download.example pub/epel/"* | "download.fedoraproject.org pub/epel/"* | "dl.fedoraproject.org pub/epel/"*)
      printf '%s/epel/%s\n' "$QR_MIRROR" "${path#pub/epel/}"
      ;;
  esac
}

# Prints a .repo FILE with each official (often commented-out) baseurl set to the mirror
# and the mirrorlist/metalink of those sections commented out.
qr_rhel_rewrite() {
  local file=$1 line url i section=0
  local -a lines=() sections=() mirrored=()
  local baseurl_re='^#?[[:space:]]*baseurl[[:space:]]*=[[:space:]]*([^[:space:]]+)[[:space:]]*$'
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line =~ ^[[:space:]]*\[ ]]; then
      section=$((section + 1))
    fi
    if [[ $line =~ $baseurl_re ]]; then
      url=$(qr_rhel_map_url "${BASH_REMATCH[1]}")
      if [[ -n $url ]]; then
        line="baseurl=$url"
        mirrored[section]=1
      fi
    fi
    lines+=("$line")
    sections+=("$section")
  done <"$file"
  for i in "${!lines[@]}"; do
    line=${lines[i]}
    if [[ -n ${mirrored[${sections[i]}]:-} && $line =~ ^[[:space:]]*(mirrorlist|metalink)[[:space:]]*= ]]; then
      line="#$line"
    fi
    printf '%s\n' "$line"
  done
}

qr_rhel_repo_files() {
  local file
  QR_REPO_FILES=()
  for file in /etc/yum.repos.d/*.repo; do
    if [[ -f $file ]]; then
      QR_REPO_FILES+=("$file")
    fi
  done
}

qr_rhel_mirror() {
  local file
  qr_rhel_repo_files
  for file in "${QR_REPO_FILES[@]}"; do
    qr_mirror_file "$file" qr_rhel_rewrite
  done
}

qr_pkg_prepare() {
  if [[ -n $QR_MIRROR ]]; then
    qr_info "pointing dnf at $QR_MIRROR (/etc/yum.repos.d)"
  else
    qr_info "keeping the image's dnf repositories (QEMURUN_MIRROR is empty)"
  fi
  qr_rhel_mirror
  if [[ -n $QR_MIRROR ]]; then
    qr_require_mirror_in "${QR_REPO_FILES[@]}"
  fi
  qr_info "enabling EPEL"
  qr_dnf install epel-release
  qr_rhel_mirror # epel-release has just added its own repo files
  qr_info "refreshing package metadata"
  qr_dnf makecache --refresh
}

qr_pkg_refresh() {
  qr_dnf makecache --refresh
}

qr_pkg_upgrade() {
  qr_dnf upgrade
}

qr_pkg_install() {
  qr_dnf install "$@"
}

# --whatprovides: a name the package manager resolves by what a package provides
# (vim for vim-enhanced) counts as installed too.
qr_pkg_missing() {
  local pkg
  for pkg in "$@"; do
    if ! rpm -q --quiet --whatprovides "$pkg" 2>/dev/null; then
      printf '%s\n' "$pkg"
    fi
  done
}

qr_pkg_clean() {
  qr_dnf clean all
}

qr_configure_locale() {
  qr_info "keeping the image's locale (QEMURUN_LOCALE applies to Debian and Ubuntu)"
}
