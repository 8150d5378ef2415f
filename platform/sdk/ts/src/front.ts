/// <reference path="./assets.d.ts" />
// @wasmkeep/sdk/front: the app's front, a `fetch` handler over standard
// `Request` / `Response`, serving every path outside `/actor/`. A front
// has no storage and no sockets of its own: it calls actors, and hands
// WebSockets to them.
//
//   import { actors, type Front } from '@wasmkeep/sdk/front';
//   export default {
//     async fetch(request) {
//       return actors.call('counter', 'main', '/');
//     },
//   } satisfies Front;

export { actors, CallError, type CallErrorKind, type CallResponse } from './calls.ts';
export type { CallRequest } from './convert.ts';
export { values } from './values.ts';
export { HEAD, encodeName, decodeName, isReserved, isWebSocket, handOff, caller, chain, app } from './head.ts';
export type { ActorRef, Caller } from './head.ts';

/** A front: its `fetch` answers each request. */
export interface Front {
  fetch(request: Request): Response | Promise<Response>;
}

declare function addEventListener(type: 'fetch', listener: (event: { request: Request; respondWith(r: Promise<Response>): void }) => void): void;

/** Serves `front` (the build writes the call). A failure is a `500`. */
export function __serve(front: Front | Front['fetch']): void {
  const fetch = typeof front === 'function' ? front : front.fetch.bind(front);
  addEventListener('fetch', (event) =>
    event.respondWith(
      (async () => {
        try {
          return await fetch(event.request);
        } catch (e) {
          console.error(`front: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
          return new Response('internal error\n', { status: 500 });
        }
      })(),
    ),
  );
}
