/**
 * What every service method receives besides its request. Declared with the
 * domain's RPC types (src/domain/rpc.ts), which the transports build it for.
 */
export {
  CallAbort,
  PUBLIC_BASE_URL_METADATA,
  SURFACE_METADATA,
  type BotPrincipal,
  type CallContext,
  type CallMetadata,
  type CallSignal,
  type InternalPrincipal,
  type Principal,
} from '../domain/rpc.js';
