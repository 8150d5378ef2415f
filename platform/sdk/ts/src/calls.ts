/// <reference path="../types/actor-core.d.ts" />
// Calls to the other actors of the app, from an actor or a front.

import { call as callHost } from 'wasmkeep:actor/actors@0.2.0';
import type { CallError as CallErrorRecord } from 'wasmkeep:actor/actors@0.2.0';
import { callMany as callManyHost } from 'wasmkeep:actor/calls@0.2.0';
import type { Response as ResponseRecord } from 'wasmkeep:actor/actors@0.2.0';
import { type CallRequest, hostError, isResponseStatus, recordFromRequest, responseFromRecord } from './convert.ts';

/** Why a call did not answer. */
export type CallErrorKind = 'invalid-address' | 'too-large' | 'reentrant' | 'timeout' | 'failed';

/**
 * A call that did not answer: `invalid-address` (no such class, a bad
 * name, an internal class from outside), `too-large` (the request or the
 * answer over its limit), `reentrant` (the callee waits on this event),
 * `timeout` (the call deadline passed), `failed(reason)` (anything else:
 * the callee trapped, was refused, or is unreachable).
 */
export class CallError extends Error {
  readonly kind: CallErrorKind;
  /** The host's reason, for `failed`. */
  readonly reason?: string;

  constructor(kind: CallErrorKind, reason?: string) {
    super(reason === undefined ? kind : `${kind}: ${reason}`);
    this.name = 'CallError';
    this.kind = kind;
    this.reason = reason;
  }

  /** The error a host record describes. */
  static fromRecord(record: CallErrorRecord): CallError {
    return record.tag === 'failed' ? new CallError('failed', record.val) : new CallError(record.tag);
  }
}

/** What one entry of `callMany` gives: the callee's answer. */
export type CallResponse = Response;

/**
 * The callee's answer, or the `failed` error of one a `Response` cannot
 * carry (a status outside 200–599, which a Rust callee may answer).
 */
function answerOf(record: ResponseRecord): Response | CallError {
  if (!isResponseStatus(record.status)) {
    return new CallError('failed', `the callee answered status ${record.status}, which a Response cannot carry`);
  }
  return responseFromRecord(record);
}

/** A call's `err` as thrown by the component's bindings; anything else thrown again. */
function payloadOf(thrown: unknown): CallErrorRecord {
  const err = hostError(thrown);
  if (err === undefined) throw thrown;
  return err as CallErrorRecord;
}

/** Calls to the app's actors. */
export const actors = {
  /**
   * Calls actor `name` of class `cls` and waits for its answer, an error
   * (a rejected `CallError`), or this event's call deadline. The callee
   * reads who calls from the head (`caller`, `chain`, `app`); any header
   * of the reserved range set here is dropped.
   */
  async call(cls: string, name: string, request: CallRequest): Promise<Response> {
    const record = await recordFromRequest(request);
    let answer;
    try {
      answer = answerOf(callHost(`${cls}/${name}`, record));
    } catch (thrown) {
      throw CallError.fromRecord(payloadOf(thrown));
    }
    if (answer instanceof CallError) throw answer;
    return answer;
  },

  /**
   * Starts every call at once (`[address, request]`, the address
   * `class/name`) and resolves when all have answered or the deadline
   * passed: one entry per call, in input order, each the callee's
   * response or a `CallError` (never thrown for one entry). At most 16
   * entries; the requests together and the answers together at most
   * 16 MiB (the host's rules; this adds none).
   */
  async callMany(calls: Array<[address: string, request: CallRequest]>): Promise<Array<CallResponse | CallError>> {
    const records = await Promise.all(calls.map(async ([address, request]) => [address, await recordFromRequest(request)] as [string, Awaited<ReturnType<typeof recordFromRequest>>]));
    return callManyHost(records).map((result) =>
      result.tag === 'ok' ? answerOf(result.val) : CallError.fromRecord(result.val),
    );
  },
};
