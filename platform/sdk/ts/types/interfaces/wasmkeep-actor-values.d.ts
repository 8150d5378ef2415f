declare module 'wasmkeep:actor/values@0.2.0' {
  /**
   * The value named `name`, if the app has it set.
   */
  export function get(name: string): string | undefined;
}
