import type { Response } from 'express';

/** How the VM routes answer once their work is done (failures are HttpErrors, see api/errors.ts). */

/** An operation that waited for its workflow: the seed's plain `ok`. */
export function answerOk(res: Response): void {
  res.type('text/plain').send('ok');
}

/** `qm status` as the seed printed it: running, stopped, paused, ... */
export function answerStatus(res: Response, state: string): void {
  res.type('text/plain').send(state);
}

export function answerAdopted(res: Response, adopted: { vmid: number; owner?: string; workflowId: string }): void {
  res.json({ success: true, message: `VM ${adopted.vmid} is now managed by QemuRun`, vmid: adopted.vmid, owner: adopted.owner, workflowId: adopted.workflowId });
}
