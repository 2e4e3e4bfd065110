import { namespaceFor } from './namespaces';

// The namespace of this test file (./apiMode), read by the harness and by every test
// that talks to Temporal itself (testNamespace()).
process.env.TEST_TEMPORAL_NAMESPACE = namespaceFor(expect.getState().testPath ?? 'unknown', process.env.TEST_PROXMOX_MODE === 'api');
