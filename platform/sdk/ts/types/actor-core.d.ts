/// <reference path="./interfaces/wasmkeep-actor-actors.d.ts" />
/// <reference path="./interfaces/wasmkeep-actor-calls.d.ts" />
/// <reference path="./interfaces/wasmkeep-actor-events.d.ts" />
/// <reference path="./interfaces/wasmkeep-actor-self.d.ts" />
/// <reference path="./interfaces/wasmkeep-actor-sockets.d.ts" />
/// <reference path="./interfaces/wasmkeep-actor-storage.d.ts" />
/// <reference path="./interfaces/wasmkeep-actor-values.d.ts" />
declare module 'wasmkeep:actor/actor-core@0.2.0' {
  export type * as WasmkeepActorActors020 from 'wasmkeep:actor/actors@0.2.0'; // import wasmkeep:actor/actors@0.2.0
  export type * as WasmkeepActorCalls020 from 'wasmkeep:actor/calls@0.2.0'; // import wasmkeep:actor/calls@0.2.0
  export type * as WasmkeepActorSelf020 from 'wasmkeep:actor/self@0.2.0'; // import wasmkeep:actor/self@0.2.0
  export type * as WasmkeepActorSockets020 from 'wasmkeep:actor/sockets@0.2.0'; // import wasmkeep:actor/sockets@0.2.0
  export type * as WasmkeepActorStorage020 from 'wasmkeep:actor/storage@0.2.0'; // import wasmkeep:actor/storage@0.2.0
  export type * as WasmkeepActorValues020 from 'wasmkeep:actor/values@0.2.0'; // import wasmkeep:actor/values@0.2.0
  export * as events from 'wasmkeep:actor/events@0.2.0'; // export wasmkeep:actor/events@0.2.0
}
