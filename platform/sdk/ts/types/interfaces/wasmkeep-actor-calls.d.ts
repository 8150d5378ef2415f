/// <reference path="./wasmkeep-actor-actors.d.ts" />
declare module 'wasmkeep:actor/calls@0.2.0' {
  /**
   * Starts every call at once and returns when all have answered or the
   * batch's deadline passed: one result per entry, in input order. At
   * most 16 entries; requests together and responses together at most
   * 16 MiB. Do not let the callees of one batch call each other: a cycle
   * between siblings ends in `timeout`.
   */
  export function callMany(calls: Array<[string, Request]>): Array<Result<Response, CallError>>;
  export type Request = import('wasmkeep:actor/actors@0.2.0').Request;
  export type Response = import('wasmkeep:actor/actors@0.2.0').Response;
  export type CallError = import('wasmkeep:actor/actors@0.2.0').CallError;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
