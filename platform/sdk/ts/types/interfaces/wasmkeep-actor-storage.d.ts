declare module 'wasmkeep:actor/storage@0.2.0' {
  export function get(key: string): Uint8Array | undefined;
  export function set(key: string, value: Uint8Array): void;
  export { _delete as delete };
  function _delete(key: string): void;
  /**
   * Keys starting with `prefix`, after `cursor` when given, at most
   * `limit` (capped at 1,000) per page.
   */
  export function list(prefix: string, cursor: string | undefined, limit: number): Page;
  /**
   * Deletes every key of the actor.
   */
  export function deleteAll(): void;
  export type StorageError = StorageErrorTooLarge | StorageErrorUnavailable;
  /**
   * A key or value over its limit (keys 2 KiB, values 1 MiB by default),
   * or a write over the actor's or its account's storage quota (then
   * nothing of the event is stored).
   */
  export interface StorageErrorTooLarge {
    tag: 'too-large',
    val: string,
  }
  /**
   * The store could not serve the operation; the event may retry.
   */
  export interface StorageErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
  /**
   * One page of a listing, keys in ascending byte order. `cursor` is
   * present when more keys follow: pass it to the next `list`.
   */
  export interface Page {
    entries: Array<[string, Uint8Array]>,
    cursor?: string,
  }
}
