/** The one table from gRPC status to HTTP status, used by every error path of the gateway. */
import { Code } from '../../src/errors.js';

const HTTP_STATUS: Record<Code, number> = {
  [Code.OK]: 200,
  [Code.CANCELLED]: 499, // client closed request (nginx's convention, as grpc-gateway)
  [Code.UNKNOWN]: 500,
  [Code.INVALID_ARGUMENT]: 400,
  [Code.DEADLINE_EXCEEDED]: 504,
  [Code.NOT_FOUND]: 404,
  [Code.ALREADY_EXISTS]: 409,
  [Code.PERMISSION_DENIED]: 403,
  [Code.RESOURCE_EXHAUSTED]: 429,
  // The contract's failed preconditions are all state conflicts (wrong review state,
  // webhook active), so 409 rather than grpc-gateway's 400.
  [Code.FAILED_PRECONDITION]: 409,
  [Code.ABORTED]: 409,
  [Code.OUT_OF_RANGE]: 400,
  // An RPC the core does not serve is, to an HTTP client, a path that does not exist.
  [Code.UNIMPLEMENTED]: 404,
  [Code.INTERNAL]: 500,
  [Code.UNAVAILABLE]: 503,
  [Code.DATA_LOSS]: 500,
  [Code.UNAUTHENTICATED]: 401,
};

export function httpStatusOf(code: Code): number {
  return HTTP_STATUS[code] ?? 500;
}

export function statusNameOf(code: Code): string {
  return Code[code] ?? 'UNKNOWN';
}
