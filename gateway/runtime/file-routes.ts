/**
 * The two byte endpoints behind the signed URLs the core hands out: PUT of an
 * upload (streamed into the blob store, byte count and SHA-256 checked, nothing
 * kept on a mismatch) and GET of a file's content. They are not RPCs — bytes, not
 * JSON — so they are the gateway's only hand-written routes; the signature in the
 * URL is their whole authorisation. Errors use the runtime envelope.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { blobKey, BlobMismatch, stagingKey, type BlobStore } from '../../src/blobs/blob-store.js';
import type { UrlSigner, Verified } from '../../src/blobs/signed-token.js';
import { ApiError, Code } from '../../src/errors.js';

export interface FileRoutesOptions {
  blobs: BlobStore;
  signer: UrlSigner;
}

function grantOf<G>(v: Verified<G>, what: string): G {
  if ('ok' in v) return v.ok;
  if (v.error === 'EXPIRED') throw new ApiError(Code.PERMISSION_DENIED, `this ${what} URL has expired; ask for a new one`);
  throw new ApiError(Code.PERMISSION_DENIED, `this ${what} URL is not valid (altered or not signed by this service)`);
}

/** Whether the client went away mid-body (then there is nobody to answer). */
const clientGone = (request: FastifyRequest) => request.raw.destroyed || request.raw.readableAborted;

export function registerFileRoutes(app: FastifyInstance, opts: FileRoutesOptions): void {
  const config = { surface: 'runtime' as const };

  app.register(async (scope) => {
    // The body stays a stream for the handler: no parser reads it, no body limit applies.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null));

    scope.put('/api/v1/files/upload/:token', { config }, async (request, reply) => {
      const grant = grantOf(opts.signer.verify((request.params as { token: string }).token, 'upload'), 'upload');
      const declared = request.headers['content-length'];
      if (declared !== undefined && Number(declared) !== grant.size) {
        reply.header('connection', 'close'); // do not read a body we already refuse
        throw ApiError.invalid('Content-Length', 'SIZE_MISMATCH', `is ${declared}; the upload credentials promised ${grant.size} bytes`);
      }
      try {
        await opts.blobs.put(stagingKey(grant.id), request.raw, { size: grant.size, sha256: grant.sha256 });
      } catch (err) {
        // A body not read to its end (the store refused it early) leaves the connection unable
        // to carry a next request (seen: the client's next call on it waited forever): close it.
        if (err instanceof BlobMismatch || !request.raw.complete) reply.header('connection', 'close');
        if (err instanceof BlobMismatch) throw ApiError.invalid('body', err.reason, `${err.message}; nothing was kept`);
        // The store's own refusal (an ApiError: 503) is said as it is, though its end broke the body's pipe too.
        if (!(err instanceof ApiError) && clientGone(request)) throw ApiError.invalid('body', 'INTERRUPTED', 'the upload was interrupted; nothing was kept');
        throw err;
      }
      return reply.code(200).send({ ok: true, result: { file_size: grant.size, checksum: grant.sha256 } });
    });
  });

  app.get('/api/v1/files/download/:token', { config }, async (request, reply) =>
    sendDownload(opts, (request.params as { token: string }).token, reply));
}

/** Answers a file's content from a signed download token (also used by the Telegram surface's /file/bot routes). */
export async function sendDownload(opts: FileRoutesOptions, token: string, reply: FastifyReply) {
  const grant = grantOf(opts.signer.verify(token, 'download'), 'download');
  const size = await opts.blobs.size(blobKey(grant.sha256));
  if (size === undefined) throw ApiError.notFound('file');
  return reply
    .header('content-type', grant.type)
    .header('content-length', String(size))
    .header('content-disposition', `attachment; filename*=UTF-8''${encodeURIComponent(grant.name)}`)
    .header('x-content-type-options', 'nosniff')
    .header('cache-control', 'private, max-age=3600')
    .send(opts.blobs.read(blobKey(grant.sha256)));
}
