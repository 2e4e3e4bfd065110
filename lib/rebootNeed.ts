import type { RebootNeed } from '../contract';

/**
 * Whether a guest must reboot after its init script, asked the way each OS family tells:
 * Debian and Ubuntu leave /run/reboot-required (with the packages in .pkgs), RHEL's
 * `needs-restarting -r` exits 1, and on any of them a kernel newer than the running one in
 * /boot needs a boot to be used (Debian's own kernel packages write no flag file). The
 * script only reads; it prints one line: `required <why>` or `not-required <why>`.
 * needs-restarting runs through `sudo -n`: some versions want root, and without a
 * password-less sudo it is skipped rather than prompting.
 */
export const REBOOT_NEED_SCRIPT = `
if [ -e /run/reboot-required ]; then
  pkgs=$(sort -u /run/reboot-required.pkgs 2>/dev/null | tr '\\n' ' ')
  echo "required /run/reboot-required is there\${pkgs:+ (for \${pkgs% })}"
  exit 0
fi
if command -v needs-restarting >/dev/null 2>&1; then
  sudo -n needs-restarting -r >/dev/null 2>&1
  if [ $? -eq 1 ]; then echo "required needs-restarting -r says so (the kernel or core libraries were updated)"; exit 0; fi
fi
running=$(uname -r)
newest=$(ls -1 /boot 2>/dev/null | sed -n 's/^vmlinuz-//p' | grep -v rescue | sort -V | tail -n 1)
if [ -n "$newest" ] && [ "$newest" != "$running" ] && [ "$(printf '%s\\n%s\\n' "$running" "$newest" | sort -V | tail -n 1)" = "$newest" ]; then
  echo "required kernel $newest is installed, $running is running"
  exit 0
fi
echo "not-required no newer kernel than the running $running, no /run/reboot-required"
`;

/** What the guest said; a guest that said nothing readable needs the reboot, to be safe. */
export function parseRebootNeed(stdout: string, exitCode: number): RebootNeed {
  const line = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .pop();
  const m = line === undefined ? null : /^(required|not-required) (.+)$/.exec(line);
  if (exitCode !== 0 || !m) return { required: true, why: `the guest could not say whether it needs one (exit ${exitCode}${line ? `: ${line}` : ''})` };
  return { required: m[1] === 'required', why: m[2] };
}
