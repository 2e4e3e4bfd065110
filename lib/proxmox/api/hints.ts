/**
 * What to do about an API failure no retry can heal, for the errors whose Proxmox text
 * says what is wrong but not what the operator should change. Added to the error's
 * message as a `to fix:` line.
 */
export function fixFor(status: number, text: string, path: string): string | undefined {
  // pve-manager PVE/HTTPServer.pm, auth_handler: a token verify_token refuses (no such
  // user or token, expired, wrong secret) is answered `401 Authentication failed!`.
  if (status === 401) {
    return 'Proxmox refused the API token (removed, expired, or a wrong secret): create one as docs/proxmox-api.md shows and set PROXMOX_API_TOKEN (or PROXMOX_API_TOKEN_FILE)';
  }
  // qemu-server PVE/API2/Qemu/Agent.pm: the guest agent's privilege, which Proxmox VE 9
  // renamed. A role made for 8.4 lost `VM.Monitor` at the upgrade to 9 (pve-access-control
  // ignores privileges it does not know), so the 403 names the release's own.
  if (status === 403 && /\/agent\//.test(path)) {
    if (/VM\.GuestAgent\./.test(text)) {
      return "give the token's role VM.GuestAgent.Audit and VM.GuestAgent.FileRead, Proxmox VE 9's guest agent privileges (a role made for 8.4 had VM.Monitor, which 9 dropped): pveum role modify <role> --privs VM.GuestAgent.Audit,VM.GuestAgent.FileRead --append 1 (docs/proxmox-api.md)";
    }
    if (/VM\.Monitor/.test(text)) {
      return "give the token's role VM.Monitor, Proxmox VE 8's guest agent privilege: pveum role modify <role> --privs VM.Monitor --append 1 (docs/proxmox-api.md)";
    }
  }
  // pve-storage PVE/API2/Storage/Status.pm, download_url.
  const content = /storage '([^']+)' is not configured for content-type '([^']+)'/.exec(text);
  if (content) {
    const [, storage, type] = content;
    return `allow content '${type}' on storage '${storage}' (Datacenter → Storage → ${storage} → Content, or pvesm set ${storage} --content <its present list>,${type}), or set PROXMOX_IMAGE_STORAGE to a storage that allows it`;
  }
  // pve-storage PVE/API2/Storage/Status.pm, read_status and index: raise_param_exc.
  if (/\bNo such storage\./.test(text)) {
    const storage = /\/storage\/([^/]+)/.exec(path)?.[1];
    return `${storage ? `storage '${decodeURIComponent(storage)}'` : 'the storage'} does not exist on that node: check ASSIGN_STORAGE and PROXMOX_IMAGE_STORAGE against the node's storages (pvesm status)`;
  }
  return undefined;
}
