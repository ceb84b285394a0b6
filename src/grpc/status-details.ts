/**
 * ApiError ⇄ gRPC status with rich details (error-status.ts) inside
 * `grpc-status-details-bin`, the standard any gRPC client can read.
 */
import { Metadata, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { ApiError, Code, ERROR_DOMAIN } from '../errors.js';
import { BAD_REQUEST, ERROR_INFO, RETRY_INFO, toStatusMessage } from '../error-status.js';
import { BadRequest, ErrorInfo, RetryInfo } from '../gen/google/rpc/error_details.js';
import { Status } from '../gen/google/rpc/status.js';

const DETAILS_KEY = 'grpc-status-details-bin';

export function toGrpcStatus(err: ApiError): Partial<StatusObject> {
  const status = toStatusMessage(err);
  const metadata = new Metadata();
  if (status.details.length > 0) metadata.set(DETAILS_KEY, Buffer.from(Status.encode(status).finish()));
  return { code: err.code as number, details: err.message, metadata };
}

/** Rebuilds the ApiError a core answered with, from a client-side ServiceError. */
export function fromServiceError(err: ServiceError): ApiError {
  const code = (err.code ?? Code.UNKNOWN) as number as Code;
  const options: ConstructorParameters<typeof ApiError>[2] = { cause: err };
  /** The status is an ApiError the core answered with (its ErrorInfo in our domain), not grpc-js's own. */
  let fromCore = false;
  const raw = err.metadata?.get(DETAILS_KEY)[0];
  if (raw instanceof Buffer) {
    try {
      for (const any of Status.decode(raw).details) {
        if (any.typeUrl === BAD_REQUEST) {
          options.details = BadRequest.decode(any.value).fieldViolations.map((v) => ({
            field: v.field, reason: v.reason, description: v.description,
          }));
        } else if (any.typeUrl === RETRY_INFO) {
          options.retryAfterSeconds = RetryInfo.decode(any.value).retryDelay?.seconds;
        } else if (any.typeUrl === ERROR_INFO) {
          const info = ErrorInfo.decode(any.value);
          if (info.domain === ERROR_DOMAIN) {
            fromCore = true;
            options.reason = info.reason;
            options.metadata = info.metadata;
          }
        }
      }
    } catch {
      // Undecodable details: keep code and message.
    }
  }
  // grpc-js's own (no connection, deadline passed) say transport details a caller cannot use;
  // the core's own (its database or file store unavailable) keep their message.
  if (!fromCore && (code === Code.UNAVAILABLE || code === Code.DEADLINE_EXCEEDED)) return new ApiError(code, 'core unavailable', options);
  return new ApiError(code, err.details || 'error', options);
}
