// Set before the test file loads, so the harness (./harness) starts in API mode; its
// namespace is set after, by ./namespaceSetup, from this mode and the file's name.
process.env.TEST_PROXMOX_MODE = 'api';
