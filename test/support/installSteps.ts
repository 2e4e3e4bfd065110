import { installSteps } from '../../contract/steps';

/**
 * The wire names of the steps of an image install that migrates and reboots, in the order
 * they end: what the CLI prints one line each for, recorded or live.
 */
export const imageInstallStepNames: readonly string[] = [
  installSteps.storage,
  installSteps.cpuBaseline,
  installSteps.download,
  installSteps.stageImage,
  installSteps.serviceKey,
  installSteps.createVm,
  installSteps.importDisk,
  installSteps.configure,
  installSteps.migrate,
  installSteps.start,
  installSteps.waitForSsh,
  installSteps.initScript,
  installSteps.reboot,
  installSteps.waitForSsh,
].map((s) => s.wire);
