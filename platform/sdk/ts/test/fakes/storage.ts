// The host's `storage` interface over a map, refusing values over 16 bytes
// as the host refuses values over its limit.
export const kept = new Map<string, Uint8Array>();

function refuse(val: string): never {
  throw Object.assign(new Error('storage'), { payload: { tag: 'too-large', val } });
}

export function get(key: string): Uint8Array | undefined {
  return kept.get(key);
}
export function set(key: string, value: Uint8Array): void {
  if (value.length > 16) refuse(`value of ${value.length} bytes is over the limit of 16`);
  kept.set(key, value);
}
function _delete(key: string): void {
  kept.delete(key);
}
export { _delete as delete };
export function list(prefix: string, cursor: string | undefined, asked: number) {
  // As the host: 0 is the most, 1,000.
  const limit = asked === 0 ? 1000 : Math.min(asked, 1000);
  const keys = [...kept.keys()].filter((k) => k.startsWith(prefix) && (cursor === undefined || k > cursor)).sort();
  const page = keys.slice(0, limit);
  return { entries: page.map((k) => [k, kept.get(k)!] as [string, Uint8Array]), cursor: keys.length > limit ? page[page.length - 1] : undefined };
}
export function deleteAll(): void {
  kept.clear();
}
