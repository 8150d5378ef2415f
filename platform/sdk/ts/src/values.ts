/// <reference path="../types/actor-core.d.ts" />
// The app's values: secrets and settings the tenant sets.

import { get } from 'wasmkeep:actor/values@0.2.0';

export const values = {
  /** The value `name`, or `undefined` when the app has none by that name. */
  get(name: string): string | undefined {
    return get(name);
  },
};
