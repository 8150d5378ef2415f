export const set = new Map<string, string>();
export function get(name: string): string | undefined {
  return set.get(name);
}
