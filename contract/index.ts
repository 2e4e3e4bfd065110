/**
 * What workflows, activities and the API share: workflow and activity interfaces,
 * signals and queries, search attributes, workflow ids, failure type names, the input
 * rules (the API's request bodies included) and the owner marker. Workflow code imports
 * it, so it (and everything it imports) stays free of Node.js modules; the lint rules in
 * eslint.config.mjs enforce it.
 */
export * from './types';
export * from './ids';
export * from './failures';
export * from './searchAttributes';
export * from './inputs';
export * from './requests';
export * from './openSshKey';
export * from './ownership';
export * from './progress';
export * from './workflows';
export * from './activities';
export * from './reconcile';
export * from './addressPools';
export * from './addressRanges';
export * from './storageSlots';
export * from './templates';
export * from './steps';
