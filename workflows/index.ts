// Every workflow the worker registers. A workflow's type in the Temporal UI is its
// function name here.
export { installVm } from './install';
export { vmStart, vmReboot, vmShutdown, vmStop, vmDestroy, vmSetCpu, vmSetMemory, vmSetDisk, vmMigrate, vmAdopt } from './lifecycle';
export { vmRebuild } from './rebuild';
export { scheduledRebuild } from './scheduledRebuild';
export { reconcileVms } from './reconcile';
export { addressPool } from './addressPool';
export { storageSlots } from './storageSlots';
export { buildTemplate } from './template';
