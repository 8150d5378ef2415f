// The host's `calls` interface, as the unit tests drive it.
import type { CallError, Request, Response } from 'wasmkeep:actor/actors@0.2.0';
import { answer } from './actors.ts';

export type Result<T, E> = { tag: 'ok'; val: T } | { tag: 'err'; val: E };

export const batches: Array<Array<[string, Request]>> = [];

export function callMany(calls: Array<[string, Request]>): Array<Result<Response, CallError>> {
  batches.push(calls);
  return calls.map(([address, request]) => {
    const a = answer(address, request);
    return 'err' in a ? { tag: 'err', val: a.err } : { tag: 'ok', val: a };
  });
}
