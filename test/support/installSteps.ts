import { installSteps } from '../../contract/steps';

/** The steps of an image install that migrates and reboots, after the preparation. */
const afterPreparation = [
  installSteps.createVm,
  installSteps.importDisk,
  installSteps.configure,
  installSteps.migrate,
  installSteps.start,
  installSteps.waitForSsh,
  installSteps.initScript,
  installSteps.reboot,
  installSteps.waitForSsh,
];

/**
 * The wire names of the steps of an image install that migrates and reboots, in the order
 * they start: what the CLI prints one line each for, recorded or live. The preparation runs
 * side by side: its steps start together, the image's once the template lookup answered.
 */
export const imageInstallStepNames: readonly string[] = [
  installSteps.storage,
  installSteps.cpuBaseline,
  installSteps.serviceKey,
  installSteps.download,
  installSteps.stageImage,
  ...afterPreparation,
].map((s) => s.wire);

/** The same, as an install recorded before the preparation ran side by side reported them: in turn. */
export const imageInstallStepNamesInTurn: readonly string[] = [
  installSteps.storage,
  installSteps.cpuBaseline,
  installSteps.download,
  installSteps.stageImage,
  installSteps.serviceKey,
  ...afterPreparation,
].map((s) => s.wire);
