// Every workflow the worker registers. A workflow's type in the Temporal UI is its
// function name here.
export { installVm } from './install';
