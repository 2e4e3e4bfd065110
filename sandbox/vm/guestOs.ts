import type { VmConf } from '../state/vmconf';

/**
 * Which OS a sandbox VM "runs": from its tags (the service tags VMs with the OS), else
 * from the name of the image its boot disk was imported from. It decides the default
 * cloud-init user and /etc/os-release, nothing else.
 */
export type GuestOsId = 'debian' | 'ubuntu' | 'rocky';

export interface GuestOs {
  id: GuestOsId | undefined;
  version: string | undefined;
}

const DEFAULT_USERS: Record<GuestOsId, string> = { debian: 'debian', ubuntu: 'ubuntu', rocky: 'rocky' };

const UBUNTU_CODENAMES: Record<string, string> = { focal: '20.04', jammy: '22.04', noble: '24.04' };
const DEBIAN_CODENAMES: Record<string, string> = { '11': 'bullseye', '12': 'bookworm', '13': 'trixie' };

function fromImage(source: string | undefined): GuestOs {
  const name = (source ?? '').split('/').pop() ?? '';
  let m = /^debian-(\d+)-/i.exec(name);
  if (m) return { id: 'debian', version: m[1] };
  m = /^ubuntu-(\d\d\.\d\d)/i.exec(name);
  if (m) return { id: 'ubuntu', version: m[1] };
  m = /^(focal|jammy|noble)-/i.exec(name);
  if (m) return { id: 'ubuntu', version: UBUNTU_CODENAMES[m[1].toLowerCase()] };
  m = /^rocky-(\d+)/i.exec(name);
  if (m) return { id: 'rocky', version: m[1] };
  return { id: undefined, version: undefined };
}

export function guestOs(conf: VmConf, bootImage: string | undefined): GuestOs {
  const image = fromImage(bootImage);
  const tags = (conf.props.tags ?? '').split(';');
  const tagged: GuestOsId | undefined = tags.includes('debian')
    ? 'debian'
    : tags.includes('ubuntu')
      ? 'ubuntu'
      : tags.includes('rockylinux') || tags.includes('rocky')
        ? 'rocky'
        : undefined;
  const id = tagged ?? image.id;
  return { id, version: id === image.id ? image.version : undefined };
}

/** The OS default user(s): all three when the OS cannot be told. */
export function defaultUsers(os: GuestOs): string[] {
  return os.id ? [DEFAULT_USERS[os.id]] : Object.values(DEFAULT_USERS);
}

export function osRelease(os: GuestOs): string {
  if (os.id === 'ubuntu') {
    const v = os.version ?? '24.04';
    const code = Object.entries(UBUNTU_CODENAMES).find(([, ver]) => ver === v)?.[0] ?? 'noble';
    return [
      `PRETTY_NAME="Ubuntu ${v} LTS"`, 'NAME="Ubuntu"', `VERSION_ID="${v}"`, `VERSION="${v} LTS (${code[0].toUpperCase()}${code.slice(1)})"`,
      `VERSION_CODENAME=${code}`, 'ID=ubuntu', 'ID_LIKE=debian', `UBUNTU_CODENAME=${code}`, '',
    ].join('\n');
  }
  if (os.id === 'rocky') {
    const v = os.version ?? '9';
    return [
      'NAME="Rocky Linux"', `VERSION="${v}.5 (Blue Onyx)"`, 'ID="rocky"', 'ID_LIKE="rhel centos fedora"', `VERSION_ID="${v}.5"`,
      `PLATFORM_ID="platform:el${v}"`, `PRETTY_NAME="Rocky Linux ${v}.5 (Blue Onyx)"`, '',
    ].join('\n');
  }
  const v = os.version ?? '12';
  const code = DEBIAN_CODENAMES[v] ?? 'bookworm';
  return [
    `PRETTY_NAME="Debian GNU/Linux ${v} (${code})"`, 'NAME="Debian GNU/Linux"', `VERSION_ID="${v}"`, `VERSION="${v} (${code})"`,
    `VERSION_CODENAME=${code}`, 'ID=debian', '',
  ].join('\n');
}
