declare module 'wasmkeep:actor/actors@0.2.0' {
  /**
   * Calls another actor of the same app (`class/name`) and blocks until
   * its response, an error, or the caller's call deadline. The callee
   * sees a request event with `x-wasmkeep-caller`, `x-wasmkeep-chain`
   * and `x-wasmkeep-app` set by the host. A cycle across two
   * independent chains ends in `timeout`.
   */
  export function call(address: string, request: Request): Response;
  /**
   * A request: the method, the path with its query (`/rest?q=1`), the
   * headers (names lowercase, values as bytes) and the whole body.
   */
  export interface Request {
    method: string,
    path: string,
    headers: Array<[string, Uint8Array]>,
    body: Uint8Array,
  }
  /**
   * A response: status, headers and the whole body.
   */
  export interface Response {
    status: number,
    headers: Array<[string, Uint8Array]>,
    body: Uint8Array,
  }
  /**
   * Why a call did not return the callee's response.
   */
  export type CallError = CallErrorInvalidAddress | CallErrorTooLarge | CallErrorTimeout | CallErrorReentrant | CallErrorFailed;
  /**
   * The address is not `class/name` with a valid class and name.
   */
  export interface CallErrorInvalidAddress {
    tag: 'invalid-address',
  }
  /**
   * The request body is over the limit (16 MiB by default).
   */
  export interface CallErrorTooLarge {
    tag: 'too-large',
  }
  /**
   * The caller's call deadline passed before the answer came.
   */
  export interface CallErrorTimeout {
    tag: 'timeout',
  }
  /**
   * The callee is the caller itself or an actor waiting in its chain.
   */
  export interface CallErrorReentrant {
    tag: 'reentrant',
  }
  /**
   * Anything else: a trap in the callee, `callee overloaded`, ...
   */
  export interface CallErrorFailed {
    tag: 'failed',
    val: string,
  }
}
