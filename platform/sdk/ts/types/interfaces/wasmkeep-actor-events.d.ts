/// <reference path="./wasmkeep-actor-actors.d.ts" />
/// <reference path="./wasmkeep-actor-sockets.d.ts" />
declare module 'wasmkeep:actor/events@0.2.0' {
  /**
   * An HTTP request at `/actor/<class>/<name>/...` (the path is the rest,
   * with the query) or a call from another actor or the front.
   */
  export function onRequest(request: Request): Response;
  /**
   * A socket opens at `path`; an error refuses it with that reason.
   */
  export function onWebsocketOpen(conn: Conn, path: string): void;
  export function onWebsocketMessage(conn: Conn, message: Message): void;
  export function onWebsocketClose(conn: Conn, code: number, reason: string): void;
  export type Request = import('wasmkeep:actor/actors@0.2.0').Request;
  export type Response = import('wasmkeep:actor/actors@0.2.0').Response;
  export type Conn = import('wasmkeep:actor/sockets@0.2.0').Conn;
  export type Message = MessageText | MessageBinary;
  export interface MessageText {
    tag: 'text',
    val: string,
  }
  export interface MessageBinary {
    tag: 'binary',
    val: Uint8Array,
  }
}
