import { API_MODE_NAMESPACE } from './apiMode';

// Set before the test file loads, so the harness (./harness) starts in API mode.
process.env.TEST_PROXMOX_MODE = 'api';
process.env.TEST_TEMPORAL_NAMESPACE = API_MODE_NAMESPACE;
