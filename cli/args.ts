import { InvalidArgumentError } from 'commander';

/** Commander argument parser for an integer flag or argument; anything else is a usage error. */
export function integer(value: string): number {
  if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError('must be an integer');
  return Number(value);
}

/** A VMID argument: a positive integer, as the API wants it. */
export function vmid(value: string): number {
  if (!/^[1-9]\d*$/.test(value.trim())) throw new InvalidArgumentError('must be a VMID (a positive integer)');
  return Number(value);
}
