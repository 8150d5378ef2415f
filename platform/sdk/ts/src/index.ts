/// <reference path="./assets.d.ts" />
// @wasmkeep/sdk: actors (and what fronts share, under `@wasmkeep/sdk/front`).
//
// An actor module's default export is its class:
//
//   import { type Actor, storage } from '@wasmkeep/sdk';
//   export default class Counter implements Actor {
//     onRequest(request: Request): Response {
//       const n = (storage.getJson<number>('n') ?? 0) + 1;
//       storage.putJson('n', n);
//       return Response.json({ n });
//     }
//   }

export { type Actor, type Conn, StorageError, SocketError, storage, sockets, address, deleteSelf } from './actor.ts';
export { actors, CallError, type CallErrorKind, type CallResponse } from './calls.ts';
export type { CallRequest } from './convert.ts';
export { values } from './values.ts';
export { HEAD, encodeName, decodeName, isReserved, isWebSocket, handOff, caller, chain, app, parseCaller, parseChain, parseApp } from './head.ts';
export type { ActorRef, Caller } from './head.ts';
