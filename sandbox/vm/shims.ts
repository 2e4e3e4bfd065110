/**
 * Stand-ins for the guest's privileged tools. Each RECORDS its argv (and stdin, for the
 * tools that read secrets from it) in the VM's privileged log instead of acting, and
 * refuses to run for a non-root caller the way the real tool does, so a script that
 * forgets `sudo` fails here as on a real VM. `sudo` records itself, then runs the rest
 * of its command line as root inside the jail.
 */
export const PRIVILEGED_LOG = '/run/sandbox/privileged.log';

/** The packages the package manager stand-ins were asked to install, one a line. */
const INSTALLED_PACKAGES = '/var/lib/sandbox/installed-packages';

export interface ShimDef {
  /** Where the real tool lives on a Debian guest: only root's PATH has sbin. */
  dir: 'bin' | 'sbin';
  /** Bash condition (on "$@") under which a non-root caller is refused; default: always. */
  rootOnlyWhen?: string;
  /** What the real tool prints on stderr, and its exit code, for a non-root caller. */
  denied: string;
  deniedCode?: number;
  /** Bash condition under which stdin is read and recorded. */
  readsStdinWhen?: string;
  /** Bash run after recording, as root (e.g. output a status). */
  after?: string;
}

const accessDenied = (what: string) => `Failed to ${what}: Access denied`;

export const SHIMS: Record<string, ShimDef> = {
  'apt-get': {
    dir: 'bin',
    rootOnlyWhen: '[[ " $* " != *" -s "* && " $* " != *" --simulate "* ]]',
    denied: 'E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?',
    deniedCode: 100,
  },
  apt: {
    dir: 'bin',
    rootOnlyWhen: '[[ "$1" != list && "$1" != show && "$1" != search && "$1" != policy ]]',
    denied: 'E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?',
    deniedCode: 100,
  },
  dnf: { dir: 'bin', denied: 'Error: This command has to be run with superuser privileges (under the root user on most systems).', deniedCode: 1 },
  yum: { dir: 'bin', denied: 'Error: This command has to be run with superuser privileges (under the root user on most systems).', deniedCode: 1 },
  chpasswd: { dir: 'sbin', denied: 'chpasswd: cannot lock /etc/passwd; try again later.', readsStdinWhen: 'true' },
  passwd: {
    dir: 'bin',
    rootOnlyWhen: '[[ $# -gt 0 && "${@: -1}" != "$(id -un)" || " $* " == *" --stdin "* ]]',
    denied: 'passwd: You may not view or modify password information for root.',
    readsStdinWhen: '[[ " $* " == *" --stdin "* ]]',
  },
  chage: { dir: 'bin', rootOnlyWhen: '[[ "$1" != -l ]]', denied: 'chage: Permission denied.' },
  usermod: { dir: 'sbin', denied: 'usermod: Permission denied.\nusermod: cannot lock /etc/passwd; try again later.' },
  useradd: { dir: 'sbin', denied: 'useradd: Permission denied.\nuseradd: cannot lock /etc/passwd; try again later.' },
  systemctl: {
    dir: 'bin',
    rootOnlyWhen: '[[ ! "$*" =~ (^|[[:space:]])(status|is-active|is-enabled|is-failed|show|cat|list-units|list-unit-files|--version)($|[[:space:]]) ]]',
    denied: 'Failed to execute operation: Interactive authentication required.',
    after: 'if [[ " $* " == *" is-active "* && " $* " != *" -q"* ]]; then echo active; elif [[ " $* " == *" is-enabled "* && " $* " != *" -q"* ]]; then echo enabled; fi',
  },
  timedatectl: { dir: 'bin', rootOnlyWhen: '[[ "$1" == set-* ]]', denied: accessDenied('set time zone') },
  hostnamectl: { dir: 'bin', rootOnlyWhen: '[[ "$1" == set-* || "$1" == hostname && $# -gt 1 ]]', denied: accessDenied('set static hostname') },
  localectl: { dir: 'bin', rootOnlyWhen: '[[ "$1" == set-* ]]', denied: accessDenied('issue method call') },
  'locale-gen': { dir: 'sbin', denied: '/usr/sbin/locale-gen: line 177: /usr/lib/locale/locale-archive: Permission denied' },
  'update-locale': { dir: 'sbin', denied: 'update-locale: Unable to write /etc/default/locale: Permission denied' },
  sysctl: {
    dir: 'sbin',
    rootOnlyWhen: '[[ " $* " == *" -w "* || " $* " == *" -p"* || " $* " == *" --system "* || "$*" == *=* ]]',
    denied: 'sysctl: permission denied on key "vm.swappiness"',
    deniedCode: 255,
  },
  fallocate: {
    dir: 'bin',
    denied: 'fallocate: cannot open /swapfile: Permission denied',
    // The file must exist afterwards so the usual `chmod 600 /swapfile` that follows works.
    after: 'f="${@: -1}"; [[ -n "$f" && "$f" != -* && ! -e "$f" ]] && : > "$f"',
  },
  mkswap: { dir: 'sbin', denied: 'mkswap: cannot open /swapfile: Permission denied' },
  swapon: { dir: 'sbin', rootOnlyWhen: '[[ "$1" != --show && "$1" != -s && $# -gt 0 ]]', denied: 'swapon: /swapfile: swapon failed: Operation not permitted' },
  swapoff: { dir: 'sbin', denied: 'swapoff: /swapfile: swapoff failed: Operation not permitted' },
  reboot: { dir: 'sbin', denied: 'Call to Reboot failed: Interactive authentication required.' },
  shutdown: { dir: 'sbin', denied: 'Call to PowerOff failed: Interactive authentication required.' },
  'cloud-init': {
    dir: 'bin',
    rootOnlyWhen: '[[ "$1" != status && "$1" != query && "$1" != --version && " $* " != *" --help "* && " $* " != *" -h "* ]]',
    denied: 'cloud-init: error: insufficient permissions',
    // `clean` does what cloud-init 22.4's does to the guest's files (cmd/clean.py): its
    // state under /var/lib/cloud (the seed too with --seed), its logs with --logs, and with
    // --machine-id it deletes /etc/machine-id (23.1 writes 'uninitialized' instead). The
    // next boot then finds no instance recorded and runs the per-instance part again.
    after: `case "$1" in
  status) echo "status: done" ;;
  clean)
    if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then
      printf '%s\\n' 'usage: /usr/bin/cloud-init clean [-h] [-l] [--machine-id] [-r] [-s]' '' 'options:' '  -h, --help        show this help message and exit' '  -l, --logs        Remove cloud-init logs.' '  --machine-id      Remove /etc/machine-id for golden image creation. Next boot generates a new machine-id.' '  -r, --reboot      Reboot system after logs are cleaned so cloud-init re-runs.' '  -s, --seed        Remove cloud-init seed directory /var/lib/cloud/seed.'
      exit 0
    fi
    if [[ -d /var/lib/cloud ]]; then
      find /var/lib/cloud -mindepth 1 -maxdepth 1 ! -name seed -exec rm -rf {} +
      if [[ " $* " == *" --seed "* || " $* " == *" -s "* ]]; then rm -rf /var/lib/cloud/seed; fi
    fi
    if [[ " $* " == *" --logs "* || " $* " == *" -l "* ]]; then rm -f /var/log/cloud-init.log /var/log/cloud-init-output.log; fi
    if [[ " $* " == *" --machine-id "* ]]; then rm -f /etc/machine-id; fi
    ;;
esac`,
  },
  journalctl: {
    dir: 'bin',
    rootOnlyWhen: '[[ " $* " == *" --rotate "* || " $* " == *" --flush "* || "$*" == *--vacuum-* ]]',
    denied: 'Failed to rotate journal files: Access denied',
  },
  // Not privileged: they answer, from what the package manager stand-ins installed, the
  // questions a script asks before installing (dpkg-query -W, rpm -q).
  'dpkg-query': {
    dir: 'bin',
    rootOnlyWhen: 'false',
    denied: '',
    after: `pkg="\${@: -1}"
if grep -qxF -- "$pkg" ${INSTALLED_PACKAGES} 2>/dev/null; then
  if [[ " $* " == *" -f"* || " $* " == *" --showformat"* ]]; then printf installed; else printf '%s\\t1.0\\n' "$pkg"; fi
else
  echo "dpkg-query: no packages found matching $pkg" >&2; exit 1
fi`,
  },
  rpm: {
    dir: 'bin',
    rootOnlyWhen: 'false',
    denied: '',
    after: `pkg="\${@: -1}"
if grep -qxF -- "$pkg" ${INSTALLED_PACKAGES} 2>/dev/null; then
  [[ " $* " == *" --quiet "* ]] || echo "$pkg-1.0-1.el9.x86_64"
else
  if [[ " $* " != *" --quiet "* ]]; then if [[ " $* " == *" --whatprovides "* ]]; then echo "no package provides $pkg"; else echo "package $pkg is not installed"; fi; fi
  exit 1
fi`,
  },
};

const bashQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The common head of every shim: how one log line is written. */
const RECORD = `
record() {
  local line
  printf -v line '%s %s: %s' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$(id -un 2>/dev/null || id -u)" "$tool"
  local a
  for a in "$@"; do printf -v line '%s %q' "$line" "$a"; done
  printf '%s\\n' "$line" >> ${PRIVILEGED_LOG}
}`;

const PACKAGE_MANAGERS = ['apt-get', 'apt', 'dnf', 'yum'];

/** Marks that the guest's slow first package-manager call has happened. */
const SLOW_MIRROR_DONE = '/var/lib/sandbox/slow-mirror-done';

export function shimScript(tool: string, def: ShimDef, opts: { outputLines?: number; silenceMs?: number; exitCode?: number; cloudInitStatus?: 'error' } = {}): string {
  const rootOnly = def.rootOnlyWhen ?? 'true';
  const isPackageManager = PACKAGE_MANAGERS.includes(tool);
  const outputLines = Math.floor(opts.outputLines ?? 0);
  const silenceSec = (opts.silenceMs ?? 0) / 1000;
  const silence =
    silenceSec > 0 && isPackageManager
      ? `if [[ ! -e ${SLOW_MIRROR_DONE} ]]; then mkdir -p ${SLOW_MIRROR_DONE.replace(/\/[^/]+$/, '')}; : > ${SLOW_MIRROR_DONE}; sleep ${silenceSec}; fi`
      : '';
  const noise =
    outputLines > 0 && isPackageManager
      ? `for ((i = 1; i <= ${outputLines}; i++)); do printf 'Get:%d http://mirror.invalid/pool/main pkg%d 1.0-%d [%d kB]\\n' "$i" "$i" "$i" "$((i % 900 + 10))"; done`
      : '';
  // A mirror that answers 503: apt-get's lines and its exit status 100 (dnf's is 1).
  const failure =
    opts.exitCode && isPackageManager
      ? `printf '%s\\n' 'E: Failed to fetch http://deb.debian.org/debian/dists/stable/InRelease  503  Service Unavailable [IP: 127.0.0.1 80]' 'E: Some index files failed to download. They have been ignored, or old ones used instead.' >&2; exit ${Math.floor(opts.exitCode)}`
      : '';
  // cloud-init 20.4 to 22.4 exit 1 when a module failed, whether or not they waited.
  const statusError = tool === 'cloud-init' && opts.cloudInitStatus === 'error' ? `[[ "$1" == status ]] && { echo 'status: error'; exit 1; }` : '';
  const after = [statusError, def.after ?? ''].filter(Boolean).join('\n');
  // What an install names (the words after `install` that are not options) counts as installed.
  const installs = isPackageManager
    ? `seen=0; for a in "$@"; do if ((seen)) && [[ "$a" != -* ]]; then mkdir -p ${INSTALLED_PACKAGES.replace(/\/[^/]+$/, '')}; printf '%s\\n' "$a" >> ${INSTALLED_PACKAGES}; elif [[ "$a" == install ]]; then seen=1; fi; done`
    : '';
  return `#!/bin/bash
# Sandbox guest: records '${tool}' instead of running it (see sandbox/vm/shims.ts).
tool=${bashQuote(tool)}
${RECORD}
record "$@"
${def.readsStdinWhen ? `if ${def.readsStdinWhen}; then while IFS= read -r l || [[ -n "$l" ]]; do printf '  stdin: %s\\n' "$l" >> ${PRIVILEGED_LOG}; done; fi` : ''}
if [[ "$(id -u)" != 0 ]] && ${rootOnly}; then
  printf '%b\\n' ${bashQuote(def.denied)} >&2
  exit ${def.deniedCode ?? 1}
fi
${failure}
${after}
${installs}
${silence}
${noise}
exit 0
`;
}

/**
 * sudo: every login user may use it without a password (cloud-init's default
 * `ALL=(ALL) NOPASSWD:ALL`). Options the service might pass are understood; the command
 * then runs as root (or `-u user`) through setpriv, inside the same jail.
 */
export function sudoScript(): string {
  return `#!/bin/bash
# Sandbox guest: records 'sudo' then runs the command as root (see sandbox/vm/shims.ts).
tool=sudo
${RECORD}
record "$@"
target=root; login=0; shell=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -u) target="$2"; shift 2 ;;
    -u*) target="\${1#-u}"; shift ;;
    --user=*) target="\${1#--user=}"; shift ;;
    -g) shift 2 ;;
    -i|--login) login=1; shift ;;
    -s|--shell) shell=1; shift ;;
    -E|-H|-n|-S|-k|-b|-P|--preserve-env|--preserve-env=*|--non-interactive|--stdin) shift ;;
    --) shift; break ;;
    -*) echo "sudo: unrecognized option '$1'" >&2; exit 1 ;;
    *) break ;;
  esac
done
uid=$(id -u "$target" 2>/dev/null) || { echo "sudo: unknown user $target" >&2; exit 1; }
home=$(getent passwd "$target" | cut -d: -f6)
if [[ $# -eq 0 ]]; then
  if [[ $login == 1 || $shell == 1 ]]; then set -- /bin/bash; else echo "usage: sudo -h | -K | -k | -V" >&2; exit 1; fi
fi
exec setpriv --reuid="$uid" --regid="$(id -g "$target")" --init-groups -- env HOME="$home" USER="$target" LOGNAME="$target" SUDO_USER="$(id -un)" SUDO_UID="$(id -u)" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
`;
}
