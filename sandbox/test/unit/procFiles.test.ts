import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { readProcFile } from '../../state/files';
import { procStartTime } from '../../state/runtime';

test("a process's /proc file reads while it runs and is undefined once it is gone", () => {
  expect(readProcFile(`/proc/${process.pid}/stat`)).toMatch(new RegExp(`^${process.pid} `));
  expect(procStartTime(process.pid)).toMatch(/^\d+$/);
  // A reaped child's pid names no process (until the kernel hands it out again, far off).
  const gone = spawnSync('true').pid;
  expect(readProcFile(`/proc/${gone}/stat`)).toBeUndefined();
  expect(procStartTime(gone)).toBeUndefined();
});

test('a process that exits between the open and the read (ESRCH) is gone too, not an error', () => {
  // The kernel's answer when the race is lost cannot be provoked on demand: the read is stubbed.
  const esrch = Object.assign(new Error('ESRCH: no such process, read'), { code: 'ESRCH' });
  const read = jest.spyOn(fs, 'readFileSync').mockImplementation(() => {
    throw esrch;
  });
  try {
    expect(readProcFile('/proc/1/stat')).toBeUndefined();
    expect(procStartTime(1)).toBeUndefined();
    // Elsewhere only a missing file is "not there": other errors still surface.
    read.mockImplementation(() => {
      throw Object.assign(new Error('EACCES'), { code: 'EACCES' });
    });
    expect(() => readProcFile('/proc/1/stat')).toThrow('EACCES');
  } finally {
    read.mockRestore();
  }
});
