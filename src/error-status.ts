/**
 * The google.rpc.Status of an ApiError, with its details as Any: field violations as
 * google.rpc.BadRequest, retry hints as google.rpc.RetryInfo, and every error's reason
 * and domain (AIP-193) as google.rpc.ErrorInfo. Transport-free: gRPC trailers
 * (grpc/status-details.ts) and in-band stream errors (domain/ingest-stream.ts) both use it.
 */
import { ApiError, Code, ERROR_DOMAIN } from './errors.js';
import { BadRequest, ErrorInfo, RetryInfo } from './gen/google/rpc/error_details.js';
import type { Status } from './gen/google/rpc/status.js';

export const BAD_REQUEST = 'type.googleapis.com/google.rpc.BadRequest';
export const RETRY_INFO = 'type.googleapis.com/google.rpc.RetryInfo';
export const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';

/** The google.rpc.Status of an error, with its details (BadRequest, RetryInfo, ErrorInfo) as Any. */
export function toStatusMessage(err: ApiError): Status {
  const details = [];
  if (err.details.length > 0) {
    details.push({
      typeUrl: BAD_REQUEST,
      value: Buffer.from(BadRequest.encode({
        fieldViolations: err.details.map((d) => ({ field: d.field, description: d.description, reason: d.reason, localizedMessage: undefined })),
      }).finish()),
    });
  }
  if (err.retryAfterSeconds !== undefined) {
    details.push({
      typeUrl: RETRY_INFO,
      value: Buffer.from(RetryInfo.encode({ retryDelay: { seconds: err.retryAfterSeconds, nanos: 0 } }).finish()),
    });
  }
  if (err.code !== Code.OK) {
    details.push({
      typeUrl: ERROR_INFO,
      value: Buffer.from(ErrorInfo.encode({ reason: err.reason, domain: ERROR_DOMAIN, metadata: err.metadata }).finish()),
    });
  }
  return { code: err.code, message: err.message, details };
}
