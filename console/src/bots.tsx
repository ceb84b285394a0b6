import { useEffect, useState } from 'preact/hooks';
import { api, ApiFailure, type CreateApplicationRequest, type ListMyBotsResponse } from './api';
import { Alert, Badge, ErrorAlert, Field, fieldError, Page, Pager } from './ui';
import type { ComponentChildren } from 'preact';

/** What the list says once, the next time it is shown (what a deletion did, with the API's dates). */
let nextNote: ComponentChildren | undefined;
export function noteForBotsPage(note: ComponentChildren) {
  nextNote = note;
}

export function BotsPage() {
  const [note] = useState(() => {
    const n = nextNote;
    nextNote = undefined;
    return n;
  });
  const [page, setPage] = useState(1);
  const [data, setData] = useState<ListMyBotsResponse>();
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    api.listBots(page).then(setData, setError);
  }, [page]);
  return (
    <Page>
      <div class="row spread">
        <h1>My bots</h1>
        <a class="button primary" href="#/bots/new">New bot</a>
      </div>
      {note && <Alert kind="ok">{note}</Alert>}
      <ErrorAlert error={error} />
      {data && data.items.length === 0 && <Alert kind="info">No bots yet. Create one: a reviewer approves it, then you get its token.</Alert>}
      {data && data.items.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr><th>Name</th><th>Username</th><th>Review</th><th>Status</th><th>Delivery</th><th>Token prefix</th></tr>
            </thead>
            <tbody>
              {data.items.map((b) => (
                <tr key={b.id}>
                  <td><a href={`#/bots/${encodeURIComponent(b.id)}`}>{b.name}</a></td>
                  <td>@{b.username}</td>
                  <td><Badge value={b.review_status} /></td>
                  <td><Badge value={b.status} /></td>
                  <td>{b.delivery_mode}{b.webhook_disabled && <> <Badge value="webhook_disabled" /></>}</td>
                  <td><code>{b.token_prefix ?? '—'}</code></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager pagination={data?.pagination} onPage={setPage} />
    </Page>
  );
}

const FIELDS = ['name', 'username', 'description', 'avatar', 'scopes'];

export function CreateBotPage() {
  const [form, setForm] = useState({ name: '', username: '', description: '', avatar: '' });
  const [scopes, setScopes] = useState<string[]>(['send', 'receive']);
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const set = (k: keyof typeof form) => (v: string) => setForm({ ...form, [k]: v });
  const submit = async (e: Event) => {
    e.preventDefault();
    // No scope at all would be taken by the API for both: say so beside the boxes instead.
    if (scopes.length === 0) {
      setError(new ApiFailure(400, 'INVALID_ARGUMENT', 'scopes: choose at least one (send, receive)', [{ field: 'scopes', reason: 'REQUIRED' }]));
      return;
    }
    setBusy(true);
    setError(undefined);
    const body: CreateApplicationRequest = { name: form.name, username: form.username, scopes };
    if (form.description) body.description = form.description;
    if (form.avatar) body.avatar = form.avatar;
    try {
      const bot = await api.createBot(body);
      location.hash = `#/bots/${encodeURIComponent(bot.id)}`;
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const toggle = (s: string) => setScopes(scopes.includes(s) ? scopes.filter((x) => x !== s) : [...scopes, s]);
  return (
    <Page narrow>
      <p><a href="#/bots">← My bots</a></p>
      <h1>New bot</h1>
      <p class="muted">The application starts pending; a reviewer approves or rejects it.</p>
      <ErrorAlert error={error} fields={FIELDS} />
      <form onSubmit={submit} noValidate>
        <Field id="name" label="Name" value={form.name} onInput={set('name')} error={fieldError(error, 'name')} hint="1 to 100 characters" />
        <Field id="username" label="Username" value={form.username} onInput={set('username')} error={fieldError(error, 'username')}
          hint="A lowercase letter, then a-z, 0-9 or _; 3 to 64 long" />
        <Field id="description" label="Description (optional)" multiline value={form.description} onInput={set('description')}
          error={fieldError(error, 'description')} />
        <Field id="avatar" label="Avatar URL (optional)" type="url" value={form.avatar} onInput={set('avatar')} error={fieldError(error, 'avatar')}
          hint="https URL" />
        <fieldset>
          <legend>Scopes (at least one)</legend>
          {['send', 'receive'].map((s) => (
            <label class="check" key={s}><input type="checkbox" checked={scopes.includes(s)} onChange={() => toggle(s)} /> {s}</label>
          ))}
          {fieldError(error, 'scopes') && <p class="field-error">{fieldError(error, 'scopes')}</p>}
        </fieldset>
        <button type="submit" class="primary" disabled={busy}>Submit for review</button>
      </form>
    </Page>
  );
}
