import { codecEndpointFor } from '../../app/devServer';

test("the embedded UI decodes through the address the API listens on, loopback when it listens on all of them", () => {
  expect(codecEndpointFor('127.0.0.1', 8080)).toBe('http://127.0.0.1:8080/codec');
  expect(codecEndpointFor('0.0.0.0', 8080)).toBe('http://127.0.0.1:8080/codec');
  expect(codecEndpointFor('::', 8080)).toBe('http://127.0.0.1:8080/codec');
  // One address of the machine only: 127.0.0.1 would find nothing listening.
  expect(codecEndpointFor('198.51.100.7', 8080)).toBe('http://198.51.100.7:8080/codec');
  expect(codecEndpointFor('::1', 9000)).toBe('http://[::1]:9000/codec');
  expect(codecEndpointFor('qemurun.example', 8080)).toBe('http://qemurun.example:8080/codec');
});
