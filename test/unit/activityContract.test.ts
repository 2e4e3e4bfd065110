import type { Activities } from '../../contract';

/**
 * The activity contract is checked strictly: its members are function properties, so an
 * implementation is assignable only if it accepts every input the contract allows. With
 * method syntax TypeScript compares parameters both ways, and the first `@ts-expect-error`
 * below would meet no error, which `npm run typecheck` reports as an unused directive. This file is that type check's test; the runtime assertions only keep jest
 * content.
 */

// An implementation that requires a field the contract's input does not have.
const requiresMore: Pick<Activities, 'stopVm'> = {
  // @ts-expect-error the contract's input has no `node`: a workflow's call would leave it undefined
  async stopVm(input: { vmid: number; node: string }): Promise<void> {
    void input;
  },
};

// An implementation whose field has another type than the contract's.
const otherType: Pick<Activities, 'setCpu'> = {
  // @ts-expect-error `cores` is a number in the contract
  async setCpu(input: { vmid: number; cores: string }): Promise<void> {
    void input;
  },
};

// One that asks for less is fine: it can take whatever the workflows send.
const asksLess: Pick<Activities, 'stopVm'> = {
  async stopVm(): Promise<void> {},
};

test('the contract is a set of function properties, so the type check compares inputs one way', () => {
  expect([requiresMore, otherType, asksLess].every((a) => typeof Object.values(a)[0] === 'function')).toBe(true);
});
