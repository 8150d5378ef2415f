// The host's `actors` interface, as the unit tests drive it.
import type { CallError, Request, Response } from 'wasmkeep:actor/actors@0.2.0';

export const seen: Array<[string, Request]> = [];
export let answer: (address: string, request: Request) => Response | { err: CallError } = () => ({ status: 200, headers: [], body: new Uint8Array() });

export function answerWith(f: typeof answer): void {
  answer = f;
}

export function call(address: string, request: Request): Response {
  seen.push([address, request]);
  const a = answer(address, request);
  // The component's bindings throw an import's `err` with it as `payload`.
  if ('err' in a) throw Object.assign(new Error('call failed'), { payload: a.err });
  return a;
}
