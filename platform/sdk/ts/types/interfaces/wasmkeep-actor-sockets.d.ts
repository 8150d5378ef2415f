declare module 'wasmkeep:actor/sockets@0.2.0' {
  export function sendText(conn: Conn, text: string): void;
  export function sendBinary(conn: Conn, data: Uint8Array): void;
  export function close(conn: Conn, code: number, reason: string): void;
  /**
   * The actor's open sockets.
   */
  export function list(): BigUint64Array;
  /**
   * A socket's id, stable across hibernation.
   */
  export type Conn = bigint;
  export type SocketError = SocketErrorNoSuchSocket | SocketErrorTooLarge | SocketErrorQueueFull;
  /**
   * No open socket of this actor has that id.
   */
  export interface SocketErrorNoSuchSocket {
    tag: 'no-such-socket',
  }
  /**
   * The message is over the per-message limit (1 MiB by default).
   */
  export interface SocketErrorTooLarge {
    tag: 'too-large',
  }
  /**
   * The socket's send queue is full (4 MiB by default).
   */
  export interface SocketErrorQueueFull {
    tag: 'queue-full',
  }
}
