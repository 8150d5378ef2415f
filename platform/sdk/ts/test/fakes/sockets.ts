export const sent: Array<[bigint, string | Uint8Array]> = [];
export const closed: Array<[bigint, number, string]> = [];
function check(conn: bigint): void {
  if (conn !== 1n) throw Object.assign(new Error('socket'), { payload: { tag: 'no-such-socket' } });
}
export function sendText(conn: bigint, text: string): void {
  check(conn);
  sent.push([conn, text]);
}
export function sendBinary(conn: bigint, data: Uint8Array): void {
  check(conn);
  sent.push([conn, data]);
}
export function close(conn: bigint, code: number, reason: string): void {
  check(conn);
  closed.push([conn, code, reason]);
}
export function list(): BigUint64Array {
  return new BigUint64Array([1n]);
}
