export let deleted = false;
export function address(): string {
  return 'counter/a b';
}
export function deleteSelf(): void {
  deleted = true;
}
