declare module 'wasmkeep:actor/self@0.2.0' {
  /**
   * The actor's address, `class/name`.
   */
  export function address(): string;
  /**
   * Deletes the actor: its storage is deleted, it stops existing, and
   * every socket of it closes (their close events are not delivered).
   * The current event still answers.
   */
  export function deleteSelf(): void;
}
