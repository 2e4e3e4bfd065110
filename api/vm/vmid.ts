/**
 * A VMID in a path, as every VM endpoint reads it (./routes.ts, and the rebuild's in
 * ../rebuild.ts). Leading zeros are refused: `0240` is not how anyone writes VM 240, so it
 * is more likely a mistake than a name.
 */
export function parseVmid(raw: string): number | undefined {
  const n = /^[1-9]\d{0,8}$/.test(raw) ? Number(raw) : NaN;
  return Number.isSafeInteger(n) ? n : undefined;
}

/** The 400 message for a path VMID parseVmid refused. */
export function vmidProblem(raw: string): string {
  return /^0+\d/.test(raw) ? 'id: must be a VMID without leading zeros' : 'id: must be a positive integer VMID';
}
