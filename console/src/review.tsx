import { useEffect, useState } from 'preact/hooks';
import { api, type Bot, type ListBotsResponse, type ReviewStatus } from './api';
import { Alert, Badge, ErrorAlert, Field, fieldError, fmtTime, Page, Pager } from './ui';

/** The reviewers' desk: applications by review state, approve, or reject with a reason. */
export function ReviewPage() {
  const [status, setStatus] = useState<ReviewStatus | ''>('pending');
  const [page, setPage] = useState(1);
  const [data, setData] = useState<ListBotsResponse>();
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string>();
  const [tick, setTick] = useState(0);
  useEffect(() => {
    api.reviewQueue(status, page).then((d) => { setData(d); setError(undefined); }, setError);
  }, [status, page, tick]);
  const changed = (msg: string) => {
    setDone(msg);
    setTick(tick + 1);
  };
  return (
    <Page>
      <h1>Review queue</h1>
      <div class="row">
        <label for="review-filter">Show</label>
        <select id="review-filter" value={status} onChange={(e) => { setStatus((e.target as HTMLSelectElement).value as ReviewStatus | ''); setPage(1); }}>
          <option value="pending">Pending</option>
          <option value="approved">Approved</option>
          <option value="rejected">Rejected</option>
          <option value="">All</option>
        </select>
      </div>
      {done && <Alert kind="ok">{done}</Alert>}
      <ErrorAlert error={error} />
      {data && data.items.length === 0 && <Alert kind="info">Nothing here.</Alert>}
      <ul class="cards">
        {data?.items.map((b) => <ReviewCard key={b.id} bot={b} onDone={changed} />)}
      </ul>
      <Pager pagination={data?.pagination} onPage={setPage} />
    </Page>
  );
}

function ReviewCard({ bot, onDone }: { bot: Bot; onDone: (msg: string) => void }) {
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const act = async (f: () => Promise<unknown>, msg: string) => {
    setBusy(true);
    setError(undefined);
    try {
      await f();
      onDone(msg);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <li class="card" aria-label={`Application ${bot.name}`}>
      <div class="row spread">
        <h2>{bot.name} <span class="muted">@{bot.username}</span></h2>
        <Badge value={bot.review_status} />
      </div>
      <p class="muted">Owner {bot.owner_id} · submitted {fmtTime(bot.created_at)} · scopes {bot.scopes.join(', ') || '—'}</p>
      {bot.description && <p>{bot.description}</p>}
      {bot.review_reason && <p>Reason: {bot.review_reason}</p>}
      <ErrorAlert error={error} fields={['reason']} />
      {bot.review_status === 'pending' && !rejecting && (
        <div class="row">
          <button type="button" class="primary" disabled={busy} onClick={() => act(() => api.approve(bot.id), `Approved @${bot.username}.`)}>Approve</button>
          <button type="button" disabled={busy} onClick={() => setRejecting(true)}>Reject…</button>
        </div>
      )}
      {rejecting && (
        <form onSubmit={(e) => { e.preventDefault(); void act(() => api.reject(bot.id, reason), `Rejected @${bot.username}.`); }}>
          <Field id={`reason-${bot.id}`} label="Reason (shown to the owner)" multiline value={reason} onInput={setReason} error={fieldError(error, 'reason')} />
          <div class="row">
            <button type="submit" class="danger" disabled={busy}>Reject</button>
            <button type="button" onClick={() => setRejecting(false)}>Cancel</button>
          </div>
        </form>
      )}
    </li>
  );
}
