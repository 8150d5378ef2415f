/// <reference path="../types/actor-core.d.ts" />
// What only an actor has: its storage, its sockets, its own address, and
// the export of its events.

import * as host from 'wasmkeep:actor/storage@0.2.0';
import * as socketHost from 'wasmkeep:actor/sockets@0.2.0';
import * as self from 'wasmkeep:actor/self@0.2.0';
import type { Message } from 'wasmkeep:actor/events@0.2.0';
import { hostError, recordFromResponse, requestFromRecord, type RequestRecord, type ResponseRecord } from './convert.ts';

/** A socket's id, stable for the socket's life (across hibernation too). */
export type Conn = bigint;

/**
 * An actor: one instance runs one event at a time; its fields last while
 * it is resident and are lost when it hibernates (storage is what lasts).
 */
export interface Actor {
  /** An HTTP request or a call. */
  onRequest(request: Request): Response | Promise<Response>;
  /** A WebSocket handed to this actor opened; throw to refuse it. */
  onWebSocketOpen?(conn: Conn, path: string): void | Promise<void>;
  /** A message on one of its sockets. */
  onWebSocketMessage?(conn: Conn, message: string | Uint8Array): void | Promise<void>;
  /** One of its sockets closed. */
  onWebSocketClose?(conn: Conn, code: number, reason: string): void | Promise<void>;
}

/** A storage operation refused: `too-large` (a key, a value or a quota), `unavailable`. */
export class StorageError extends Error {
  readonly kind: 'too-large' | 'unavailable';
  readonly reason: string;
  constructor(kind: 'too-large' | 'unavailable', reason: string) {
    super(`${kind}: ${reason}`);
    this.name = 'StorageError';
    this.kind = kind;
    this.reason = reason;
  }
}

/** A socket operation refused: no such socket, a message too large, its queue full. */
export class SocketError extends Error {
  readonly kind: 'no-such-socket' | 'too-large' | 'queue-full';
  constructor(kind: 'no-such-socket' | 'too-large' | 'queue-full') {
    super(kind);
    this.name = 'SocketError';
    this.kind = kind;
  }
}

function storageOp<T>(op: () => T): T {
  try {
    return op();
  } catch (thrown) {
    const p = hostError(thrown);
    if (p && (p.tag === 'too-large' || p.tag === 'unavailable')) throw new StorageError(p.tag, String(p.val));
    throw thrown;
  }
}

function socketOp(op: () => void): void {
  try {
    op();
  } catch (thrown) {
    const p = hostError(thrown);
    if (p && (p.tag === 'no-such-socket' || p.tag === 'too-large' || p.tag === 'queue-full')) throw new SocketError(p.tag);
    throw thrown;
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The actor's own storage. Writes of one event are committed together
 * when the event ends well, and not at all when it fails; its answers and
 * calls wait for that commit.
 */
export const storage = {
  get(key: string): Uint8Array | undefined {
    return storageOp(() => host.get(key));
  },
  getText(key: string): string | undefined {
    const bytes = storage.get(key);
    return bytes === undefined ? undefined : decoder.decode(bytes);
  },
  getJson<T = unknown>(key: string): T | undefined {
    const text = storage.getText(key);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  },
  put(key: string, value: Uint8Array | string): void {
    storageOp(() => host.set(key, typeof value === 'string' ? encoder.encode(value) : value));
  },
  putJson(key: string, value: unknown): void {
    storage.put(key, JSON.stringify(value));
  },
  delete(key: string): void {
    storageOp(() => host.delete(key));
  },
  /**
   * One page of keys starting with `prefix`, in byte order, at most
   * `limit` (the host's most when absent); pass `cursor` on for the next.
   */
  list(options: { prefix?: string; cursor?: string; limit?: number } = {}): { entries: Array<[string, Uint8Array]>; cursor?: string } {
    return storageOp(() => host.list(options.prefix ?? '', options.cursor, options.limit ?? 0));
  },
  /** Deletes every key of the actor. */
  deleteAll(): void {
    storageOp(() => host.deleteAll());
  },
};

/** The actor's WebSockets; the host holds them. */
export const sockets = {
  send(conn: Conn, message: string | Uint8Array): void {
    socketOp(() => (typeof message === 'string' ? socketHost.sendText(conn, message) : socketHost.sendBinary(conn, message)));
  },
  close(conn: Conn, code = 1000, reason = ''): void {
    socketOp(() => socketHost.close(conn, code, reason));
  },
  /** The actor's open sockets. */
  list(): Conn[] {
    return Array.from(socketHost.list());
  },
};

/** This actor's address, `class/name`. */
export function address(): string {
  return self.address();
}

/** Deletes this actor, its storage and its sockets, when the event ends. */
export function deleteSelf(): void {
  self.deleteSelf();
}

/** The `wasmkeep:actor/events` export for actor class `A` (the build writes it). */
export function __events(A: new () => Actor) {
  let instance: Actor | undefined;
  const actor = () => (instance ??= new A());
  return {
    async onRequest(record: RequestRecord): Promise<ResponseRecord> {
      const response = await actor().onRequest(requestFromRecord(record));
      if (!(response instanceof Response)) throw new TypeError('onRequest must answer a Response');
      return recordFromResponse(response);
    },
    async onWebsocketOpen(conn: Conn, path: string): Promise<void> {
      try {
        await actor().onWebSocketOpen?.(conn, path);
      } catch (e) {
        // The host's `err(reason)`: the socket is refused with it.
        throw e instanceof Error ? e.message : String(e);
      }
    },
    async onWebsocketMessage(conn: Conn, message: Message): Promise<void> {
      await actor().onWebSocketMessage?.(conn, message.val);
    },
    async onWebsocketClose(conn: Conn, code: number, reason: string): Promise<void> {
      await actor().onWebSocketClose?.(conn, code, reason);
    },
  };
}
