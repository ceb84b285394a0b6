import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiFailure, type ListDeliveryAttemptsResponse, type Bot, type BotCommand, type BotLink, type BotMetrics, type Delivery, type ListDeliveriesResponse, type WebhookBody } from './api';
import { noteForBotsPage } from './bots';
import { LineChart, Bars } from './charts';
import { TestChat } from './test-chat';
import { tokens, type Token } from './tokens';
import { Alert, Badge, CopyButton, ErrorAlert, Field, fieldError, fmtTime, Page, Pager } from './ui';

const TABS = [
  ['overview', 'Overview'],
  ['webhook', 'Webhook'],
  ['deliveries', 'Deliveries'],
  ['metrics', 'Metrics'],
  ['test', 'Test updates'],
] as const;

/** Polls `f` every `ms` while mounted. */
function usePoll(f: () => void, ms: number, deps: unknown[]) {
  useEffect(() => {
    f();
    const t = setInterval(f, ms);
    return () => clearInterval(t);
  }, deps);
}

export function BotPage({ id, tab }: { id: string; tab: string }) {
  const [bot, setBot] = useState<Bot>();
  const [error, setError] = useState<unknown>();
  // The token the API handed over (first read after approval, or a regeneration), with its
  // Telegram form: in memory only (tokens.ts), shown when revealed by a click.
  const [token, setTokenState] = useState(() => tokens.get(id));
  const setToken = (t: Token | undefined, revealed = false) => {
    if (t) tokens.hold(id, t, revealed);
    else tokens.forget(id);
    setTokenState(tokens.get(id) && { ...tokens.get(id)! });
  };
  const reveal = () => {
    tokens.reveal(id);
    setTokenState(tokens.get(id) && { ...tokens.get(id)! });
  };
  const load = () =>
    api.getBot(id).then((b) => {
      if (b.one_time_token) setToken({ token: b.one_time_token, telegram: b.telegram_token });
      setBot({ ...b, one_time_token: undefined, telegram_token: undefined });
    }, setError);
  useEffect(() => {
    setBot(undefined);
    setTokenState(tokens.get(id));
    void load();
  }, [id]);
  // State that stays true: read again when a tab opens and every 10 s while the page is
  // open (a webhook the platform disabled, a review decided meanwhile).
  useEffect(() => {
    if (bot) void load();
  }, [tab]);
  useEffect(() => {
    const t = setInterval(() => { if (document.visibilityState === 'visible') void load(); }, 10_000);
    return () => clearInterval(t);
  }, [id]);
  useEffect(() => {
    document.title = bot ? `${bot.name} (@${bot.username}) · ${TABS.find(([k]) => k === tab)?.[1] ?? 'Overview'} · Bot platform` : 'Bot platform';
  }, [bot?.name, bot?.username, tab]);
  if (error) return <Page><p><a href="#/bots">← My bots</a></p><ErrorAlert error={error} /></Page>;
  if (!bot) return <Page><p>Loading…</p></Page>;
  const base = `#/bots/${encodeURIComponent(id)}`;
  return (
    <Page>
      <p><a href="#/bots">← My bots</a></p>
      <div class="row spread">
        <h1>{bot.name} <span class="muted">@{bot.username}</span></h1>
        <div class="row">
          <Badge value={bot.review_status} /><Badge value={bot.status} />
          {bot.webhook?.disabled && <a href={`${base}/webhook`} class="badge b-dead_letter" id="header-webhook-disabled">webhook disabled</a>}
        </div>
      </div>
      {token && !token.revealed && <TokenWaiting onReveal={reveal} />}
      {token?.revealed && <TokenReveal token={token} onDismiss={() => setToken(undefined)} />}
      <nav class="tabs" aria-label="Bot sections">
        {TABS.map(([k, label]) => (
          <a key={k} href={k === 'overview' ? base : `${base}/${k}`} aria-current={tab === k ? 'page' : undefined}>{label}</a>
        ))}
      </nav>
      {tab === 'overview' && <Overview bot={bot} onChange={setBot} onToken={(t) => setToken(t, true)} />}
      {tab === 'webhook' && <WebhookTab bot={bot} onChange={setBot} />}
      {tab === 'deliveries' && <DeliveriesTab bot={bot} />}
      {tab === 'metrics' && <MetricsTab bot={bot} />}
      {tab === 'test' && <TestTab bot={bot} />}
    </Page>
  );
}

/**
 * The first token after approval, handed over by the API on the page's first read and held
 * in memory: revealed on a click (so it is not on the screen of whoever looks, nor drawn
 * where the developer is not looking). What happens when one leaves first is said here.
 */
function TokenWaiting({ onReveal }: { onReveal: () => void }) {
  return (
    <section class="reveal" aria-labelledby="token-waiting-title" id="token-waiting">
      <h2 id="token-waiting-title">Your bot token is ready</h2>
      <p>
        <strong>It is shown only once.</strong> The service has handed it to this page and keeps only its hash: reveal it
        and copy it now. It waits here while this tab stays open, on other pages of the console too; reloading or closing
        the tab, or signing out, loses it (you are asked first), and then only regenerating gives a new one.
      </p>
      <button type="button" class="primary" onClick={onReveal}>Reveal token</button>
    </section>
  );
}

function TokenReveal({ token, onDismiss }: { token: Token; onDismiss: () => void }) {
  // Shown once: moved into view and focused (so a screen reader reads it out), whatever
  // the screen size and wherever the button that revealed it was.
  const box = useRef<HTMLElement>(null);
  useEffect(() => {
    box.current?.scrollIntoView({ block: 'start' });
    box.current?.focus({ preventScroll: true });
  }, [token.token]);
  return (
    <section class="reveal" aria-labelledby="reveal-title" tabIndex={-1} ref={box} id="token-reveal">
      <p class="sr-only" role="status">Your bot token is shown below, this once.</p>
      <h2 id="reveal-title">Your bot token</h2>
      <p><strong>Copy it now: you will not see this again.</strong> The service keeps only its hash; if you lose it, regenerate it.</p>
      <div class="row">
        <code class="secret" id="one-time-token">{token.token}</code>
        <CopyButton text={token.token} label="Copy token" />
      </div>
      {token.telegram && (
        <>
          <p>The same token in Telegram's form, for Telegram frameworks that check a token's shape (aiogram, pyTelegramBotAPI) on the Telegram-compatible API:</p>
          <div class="row">
            <code class="secret" id="telegram-token">{token.telegram}</code>
            <CopyButton text={token.telegram} label="Copy Telegram-form token" />
          </div>
        </>
      )}
      <button type="button" onClick={onDismiss}>I have saved it</button>
    </section>
  );
}

function Overview({ bot, onChange, onToken }: { bot: Bot; onChange: (b: Bot) => void; onToken: (t: Token) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<unknown>();
  const regenerate = async () => {
    setError(undefined);
    try {
      const r = await api.regenerateToken(bot.id);
      onToken({ token: r.one_time_token, telegram: r.telegram_token });
      onChange({ ...bot, token_prefix: r.token_prefix, has_token: true });
      setConfirming(false);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <dl class="facts">
        <dt>Review</dt><dd><Badge value={bot.review_status} />{bot.review_reason && <> — {bot.review_reason}</>}</dd>
        <dt>Status</dt><dd>{bot.status}</dd>
        <dt>Delivery</dt><dd>{bot.delivery_mode}</dd>
        <dt>Token prefix</dt><dd><code>{bot.token_prefix ?? '—'}</code></dd>
        <dt>Scopes</dt><dd>{bot.scopes.join(', ')}</dd>
        <dt>Created</dt><dd>{fmtTime(bot.created_at)}</dd>
        <dt>Id</dt><dd><code>{bot.id}</code></dd>
      </dl>
      {bot.review_status === 'pending' && <Alert kind="info">Waiting for review. The token appears here once, after approval.</Alert>}
      {bot.review_status === 'rejected' && (
        <Alert kind="error">Rejected{bot.review_reason ? `: ${bot.review_reason}` : '.'} Change the application below, then resubmit it for review.</Alert>
      )}
      {bot.review_status !== 'approved' && <ApplicationForm bot={bot} onChange={onChange} />}
      {bot.review_status === 'approved' && <Quickstart bot={bot} />}
      {bot.review_status === 'approved' && (
        <section>
          <h2>Token</h2>
          <ErrorAlert error={error} />
          {!confirming ? (
            <button type="button" onClick={() => setConfirming(true)}>Regenerate token…</button>
          ) : (
            <div class="confirm" role="group" aria-label="Confirm regeneration">
              <p>The current token stops working at once. Regenerate?</p>
              <div class="row">
                <button type="button" class="danger" onClick={regenerate}>Yes, regenerate</button>
                <button type="button" onClick={() => setConfirming(false)}>Cancel</button>
              </div>
            </div>
          )}
        </section>
      )}
      {bot.review_status === 'approved' ? <ProfileForm bot={bot} onChange={onChange} /> : <p class="muted">The profile can be edited once the bot is approved.</p>}
      <DeleteBot bot={bot} />
    </>
  );
}

/** A pending or rejected application: changed in place; a rejected one resubmitted. */
function ApplicationForm({ bot, onChange }: { bot: Bot; onChange: (b: Bot) => void }) {
  const [form, setForm] = useState({ name: bot.name, username: bot.username, description: bot.description ?? '' });
  const [scopes, setScopes] = useState<string[]>(bot.scopes);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string>();
  const set = (k: keyof typeof form) => (v: string) => setForm({ ...form, [k]: v });
  const toggle = (s: string) => setScopes(scopes.includes(s) ? scopes.filter((x) => x !== s) : [...scopes, s]);
  const save = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setDone(undefined);
    try {
      onChange(await api.editApplication(bot.id, { name: form.name, username: form.username, description: form.description || null, scopes }));
      setDone('Application saved.');
    } catch (err) {
      setError(err);
    }
  };
  const resubmit = async () => {
    setError(undefined);
    try {
      onChange(await api.resubmit(bot.id));
      setDone('Resubmitted: the application is back in the review queue.');
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="app-title">
      <h2 id="app-title">Application</h2>
      {done && <Alert kind="ok">{done}</Alert>}
      <ErrorAlert error={error} fields={['name', 'username', 'description', 'scopes']} />
      <form onSubmit={save} noValidate>
        <Field id="a-name" label="Name" value={form.name} onInput={set('name')} error={fieldError(error, 'name')} hint="1 to 100 characters" />
        <Field id="a-username" label="Username" value={form.username} onInput={set('username')} error={fieldError(error, 'username')}
          hint="A lowercase letter, then a-z, 0-9 or _; 3 to 64 long" />
        <Field id="a-description" label="Description (optional)" multiline value={form.description} onInput={set('description')}
          error={fieldError(error, 'description')} />
        <fieldset>
          <legend>Scopes (at least one)</legend>
          {['send', 'receive'].map((s) => (
            <label class="check" key={s}><input type="checkbox" checked={scopes.includes(s)} onChange={() => toggle(s)} /> {s}</label>
          ))}
          {fieldError(error, 'scopes') && <p class="field-error">{fieldError(error, 'scopes')}</p>}
        </fieldset>
        <div class="row">
          <button type="submit" class="primary">Save application</button>
          {bot.review_status === 'rejected' && <button type="button" onClick={resubmit}>Resubmit for review</button>}
        </div>
      </form>
    </section>
  );
}

/** Deleting a bot (withdrawing an application), after a confirmation that names what happens. */
function DeleteBot({ bot }: { bot: Bot }) {
  const [confirming, setConfirming] = useState(false);
  const [typed, setTyped] = useState('');
  const [error, setError] = useState<unknown>();
  const withdraw = bot.review_status !== 'approved';
  const remove = async () => {
    setError(undefined);
    try {
      const done = await api.deleteBot(bot.id);
      noteForBotsPage(withdraw
        ? <>Application @{bot.username} withdrawn; the username is free again.</>
        : <span id="deleted-note">Bot @{bot.username} deleted. Its messages, files and delivery log are removed
          on <time dateTime={done.data_removed_at ?? undefined}>{fmtTime(done.data_removed_at)}</time>; until then the username stays reserved for you.</span>);
      location.hash = '#/bots';
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="delete-title">
      <h2 id="delete-title">{withdraw ? 'Withdraw the application' : 'Delete the bot'}</h2>
      <ErrorAlert error={error} />
      {!confirming ? (
        <button type="button" class="danger" onClick={() => setConfirming(true)}>{withdraw ? 'Withdraw application…' : 'Delete bot…'}</button>
      ) : (
        <div class="confirm" role="group" aria-labelledby="delete-q">
          <p id="delete-q">{withdraw
            ? <>The application is withdrawn and its username @{bot.username} is free again at once.</>
            : <>The bot is gone at once: its token is refused, its webhook stops and its queued updates are dropped. Its messages, files
              and delivery log are removed after the platform's retention period (30 days unless its operator set another;
              the date is shown once it is deleted); until then @{bot.username} stays reserved for you.</>}</p>
          <label for="delete-confirm">Type the username to confirm</label>
          <input id="delete-confirm" autoComplete="off" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} ref={(i) => i?.focus()} />
          <div class="row">
            <button type="button" class="danger" disabled={typed !== bot.username} onClick={remove}>{withdraw ? 'Withdraw it' : 'Delete it'}</button>
            <button type="button" onClick={() => { setConfirming(false); setTyped(''); }}>Cancel</button>
          </div>
        </div>
      )}
    </section>
  );
}

/** After approval: where the API is and a first call, with the SDK and a Telegram framework pointed at this platform. */
function Quickstart({ bot }: { bot: Bot }) {
  const origin = location.origin;
  const curl = `curl -s -X POST ${origin}/api/v1/bots/getMe -H "Authorization: Bearer $BOT_TOKEN"`;
  const sdk = `import { createBotClient } from '@botplatform/sdk';\nconst bot = createBotClient(process.env.BOT_TOKEN!, { baseUrl: '${origin}' });\nconsole.log(await bot.getMe());`;
  const ptb = `from telegram.ext import ApplicationBuilder\napp = ApplicationBuilder().token(TELEGRAM_FORM_TOKEN).base_url('${origin}/bot').build()`;
  return (
    <section aria-labelledby="qs-title">
      <h2 id="qs-title">Quickstart</h2>
      <p>The API is at <code>{origin}/api/v1</code> (the Telegram-compatible one at <code>{origin}/bot&lt;token&gt;/&lt;method&gt;</code>).
        Put the token in <code>BOT_TOKEN</code>, then:</p>
      <pre class="body" id="qs-curl">{curl}</pre>
      <div class="row"><CopyButton text={curl} label="Copy the curl call" /></div>
      <p>With the TypeScript SDK (<code>sdk/</code>):</p>
      <pre class="body">{sdk}</pre>
      <p>With a Telegram framework (python-telegram-bot; the token in Telegram's form, shown with the token):</p>
      <pre class="body">{ptb}</pre>
    </section>
  );
}

type Profile = {
  name: string; description: string; avatar: string; short_description: string; about: string; cover_url: string;
  email: string; contact_url: string; note: string; supports_inline_queries: boolean; friend_request_mode: string;
  group_privacy: boolean; can_join_groups: boolean; links: BotLink[]; command_menu: BotCommand[];
};

const profileOf = (b: Bot): Profile => ({
  name: b.name, description: b.description ?? '', avatar: b.avatar ?? '', short_description: b.short_description ?? '',
  about: b.about ?? '', cover_url: b.cover_url ?? '', email: b.contact?.email ?? '', contact_url: b.contact?.url ?? '',
  note: b.contact?.note ?? '', supports_inline_queries: b.supports_inline_queries, friend_request_mode: b.friend_request_mode ?? '',
  group_privacy: b.group_privacy, can_join_groups: b.can_join_groups, links: b.links ?? [], command_menu: b.command_menu ?? [],
});

const PROFILE_FIELDS = ['name', 'description', 'avatar', 'short_description', 'about', 'cover_url', 'contact', 'links', 'command_menu',
  'supports_inline_queries', 'friend_request_mode', 'group_privacy', 'can_join_groups'];

function ProfileForm({ bot, onChange }: { bot: Bot; onChange: (b: Bot) => void }) {
  const [p, setP] = useState(() => profileOf(bot));
  const [error, setError] = useState<unknown>();
  const [saved, setSaved] = useState(false);
  const orig = profileOf(bot);
  const set = <K extends keyof Profile>(k: K) => (v: Profile[K]) => { setP({ ...p, [k]: v }); setSaved(false); };
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    // Only what changed is sent: over HTTP the keys present are the update mask; an emptied text is cleared.
    const patch: Record<string, unknown> = {};
    for (const k of ['name', 'description', 'avatar', 'short_description', 'about', 'cover_url'] as const) {
      if (p[k] !== orig[k]) patch[k] = p[k] === '' && k !== 'name' ? null : p[k];
    }
    for (const k of ['supports_inline_queries', 'group_privacy', 'can_join_groups'] as const) if (p[k] !== orig[k]) patch[k] = p[k];
    if (p.friend_request_mode !== orig.friend_request_mode) patch.friend_request_mode = p.friend_request_mode || null;
    if (p.email !== orig.email || p.contact_url !== orig.contact_url || p.note !== orig.note) {
      const c: Record<string, string> = {};
      if (p.email) c.email = p.email;
      if (p.contact_url) c.url = p.contact_url;
      if (p.note) c.note = p.note;
      patch.contact = Object.keys(c).length ? c : null;
    }
    if (JSON.stringify(p.links) !== JSON.stringify(orig.links)) patch.links = p.links;
    if (JSON.stringify(p.command_menu) !== JSON.stringify(orig.command_menu)) patch.command_menu = p.command_menu;
    if (Object.keys(patch).length === 0) return setSaved(true);
    try {
      const b = await api.updateBot(bot.id, patch);
      onChange(b);
      setP(profileOf(b));
      setSaved(true);
    } catch (err) {
      setError(err);
    }
  };
  const fe = (f: string) => fieldError(error, f);
  return (
    <section>
      <h2>Profile</h2>
      <form onSubmit={submit} noValidate>
        <ErrorAlert error={error} fields={PROFILE_FIELDS} />
        {saved && <Alert kind="ok">Profile saved.</Alert>}
        <div class="grid2">
          <Field id="p-name" label="Name" value={p.name} onInput={set('name')} error={fe('name')} />
          <Field id="p-short" label="Short description" value={p.short_description} onInput={set('short_description')} error={fe('short_description')} hint="At most 120 characters" />
          <Field id="p-description" label="Description" multiline value={p.description} onInput={set('description')} error={fe('description')} />
          <Field id="p-about" label="About" multiline value={p.about} onInput={set('about')} error={fe('about')} hint="At most 512 characters" />
          <Field id="p-avatar" label="Avatar URL" value={p.avatar} onInput={set('avatar')} error={fe('avatar')} />
          <Field id="p-cover" label="Cover URL" value={p.cover_url} onInput={set('cover_url')} error={fe('cover_url')} />
        </div>
        <fieldset>
          <legend>Contact</legend>
          {fe('contact') && <p class="field-error">{fe('contact')}</p>}
          <div class="grid2">
            <Field id="p-email" label="E-mail" type="email" value={p.email} onInput={set('email')} />
            <Field id="p-contact-url" label="Support URL" value={p.contact_url} onInput={set('contact_url')} />
            <Field id="p-note" label="Note" value={p.note} onInput={set('note')} />
          </div>
        </fieldset>
        <fieldset>
          <legend>Behaviour</legend>
          <label class="check"><input type="checkbox" checked={p.supports_inline_queries} onChange={(e) => set('supports_inline_queries')((e.target as HTMLInputElement).checked)} /> Answers inline queries</label>
          <label class="check"><input type="checkbox" checked={p.group_privacy} onChange={(e) => set('group_privacy')((e.target as HTMLInputElement).checked)} /> Group privacy (sees only commands and replies)</label>
          <label class="check"><input type="checkbox" checked={p.can_join_groups} onChange={(e) => set('can_join_groups')((e.target as HTMLInputElement).checked)} /> Can join groups</label>
          <label for="p-friend">Friend requests</label>
          <select id="p-friend" value={p.friend_request_mode} onChange={(e) => set('friend_request_mode')((e.target as HTMLSelectElement).value)}>
            <option value="">Platform default (manual)</option>
            <option value="auto_accept">Accept automatically</option>
            <option value="manual">Manual</option>
            <option value="disabled">Disabled</option>
          </select>
          {fe('friend_request_mode') && <p class="field-error">{fe('friend_request_mode')}</p>}
        </fieldset>
        <PairList legend="Links" item="link" field="links" keys={['title', 'url']} items={p.links as unknown as Record<string, string>[]}
          onChange={(v) => set('links')(v as unknown as BotLink[])} error={error} hint="At most 10; a title (1 to 64 characters) and an https URL each." />
        <PairList legend="Command menu" item="command" field="command_menu" keys={['command', 'description']} items={p.command_menu as unknown as Record<string, string>[]}
          onChange={(v) => set('command_menu')(v as unknown as BotCommand[])} error={error}
          hint="At most 100 commands, each unique: 1 to 32 of a-z, 0-9 and _ (start, not /start), and a description of 1 to 256 characters." />
        <button type="submit" class="primary">Save profile</button>
      </form>
    </section>
  );
}

/**
 * A list of pairs (links, commands). The API's message for an entry's field
 * ("command_menu[0].command: ...") is shown beside that input, in words, not as a path;
 * the rules are said before they are broken (hint).
 */
function PairList({ legend, item, field, keys, items, onChange, error, hint }: {
  legend: string; item: string; field: string; keys: [string, string]; items: Record<string, string>[];
  onChange: (v: Record<string, string>[]) => void; error: unknown; hint: string;
}) {
  const idp = legend.toLowerCase().replace(/\s+/g, '-');
  const at = (i: number, k: string) => fieldError(error, `${field}[${i}].${k}`);
  // What concerns the list as a whole (too many entries), not one entry.
  const own = error instanceof ApiFailure ? error.details.find((d) => d.field.replace(/^bot\./, '') === field) : undefined;
  const whole = own && (error as ApiFailure).fieldMessage(own.field);
  return (
    <fieldset aria-describedby={`${idp}-hint`}>
      <legend>{legend}</legend>
      <small id={`${idp}-hint`} class="muted">{hint}</small>
      {items.map((it, i) => (
        <div key={i}>
          <div class="row pair">
            {keys.map((k) => (
              <input key={k} id={`${idp}-${i}-${k}`} aria-label={`${legend} ${i + 1} ${k}`} placeholder={k} value={it[k] ?? ''}
                aria-invalid={at(i, k) ? 'true' : undefined} aria-describedby={at(i, k) ? `${idp}-${i}-${k}-error` : undefined}
                onInput={(e) => onChange(items.map((x, j) => (j === i ? { ...x, [k]: (e.target as HTMLInputElement).value } : x)))} />
            ))}
            <button type="button" aria-label={`Remove ${legend} ${i + 1}`} onClick={() => onChange(items.filter((_, j) => j !== i))}>Remove</button>
          </div>
          {keys.map((k) => at(i, k) && <p key={k} class="field-error" id={`${idp}-${i}-${k}-error`}>{`${item} ${i + 1}, ${k}: ${at(i, k)}`}</p>)}
        </div>
      ))}
      <button type="button" onClick={() => onChange([...items, { [keys[0]]: '', [keys[1]]: '' }])}>Add {item}</button>
      {whole && <p class="field-error">{whole}</p>}
    </fieldset>
  );
}

/** A signing secret made in the browser (never sent anywhere but the API). */
function newSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const WEBHOOK_FIELDS = ['url', 'secret_token', 'allowed_updates', 'allowed_ips', 'max_connections', 'max_deliveries_per_second', 'drop_pending_updates'];

function WebhookTab({ bot, onChange }: { bot: Bot; onChange: (b: Bot) => void }) {
  const [url, setUrl] = useState(bot.webhook?.url ?? '');
  const [secret, setSecret] = useState('');
  const [updates, setUpdates] = useState<string[]>(bot.webhook?.allowed_updates ?? []);
  const [ips, setIps] = useState((bot.webhook?.allowed_ips ?? []).join(', '));
  const [maxConn, setMaxConn] = useState(String(bot.webhook?.max_connections ?? 40));
  const [perSecond, setPerSecond] = useState(bot.webhook?.max_deliveries_per_second ? String(bot.webhook.max_deliveries_per_second) : '');
  const [drop, setDrop] = useState(false);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState<string>();
  const [state, setState] = useState<{ pending: number; lastError?: string; lastErrorAt?: string | null }>();
  const [confirmDelete, setConfirmDelete] = useState(false);
  usePoll(() => {
    if (bot.review_status !== 'approved') return;
    Promise.all([api.metrics(bot.id, 3600), api.deliveries(bot.id, 1, 20)]).then(([m, d]) => {
      const failed = d.items.find((x) => x.last_error || (x.last_status_code && x.last_status_code >= 300));
      setState({ pending: m.updates?.pending ?? 0, lastError: failed ? failed.last_error ?? `HTTP ${failed.last_status_code}` : undefined, lastErrorAt: failed?.last_attempt_at });
    }, () => {});
  }, 3000, [bot.id, bot.delivery_mode]);
  if (bot.review_status !== 'approved') return <Alert kind="info">A webhook can be set once the bot is approved.</Alert>;
  const save = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setDone(undefined);
    // No secret given: an existing webhook keeps its own (the receiver need not change).
    const body = {
      url, allowed_updates: updates, allowed_ips: ips.split(/[\s,]+/).filter(Boolean), drop_pending_updates: drop,
      ...(secret ? { secret_token: secret } : {}),
    } as WebhookBody;
    if (maxConn.trim() !== '') body.max_connections = Number(maxConn);
    if (perSecond.trim() !== '') body.max_deliveries_per_second = Number(perSecond);
    try {
      onChange(await api.setWebhook(bot.id, body));
      setDone(bot.webhook && !secret ? 'Webhook saved; its secret is unchanged.' : 'Webhook set: updates are now POSTed to it.');
      setSecret('');
    } catch (err) {
      setError(err);
    }
  };
  const remove = async () => {
    setError(undefined);
    setConfirmDelete(false);
    try {
      onChange(await api.deleteWebhook(bot.id, drop));
      setDone('Webhook deleted: the bot is back to polling (getUpdates).');
    } catch (err) {
      setError(err);
    }
  };
  const enable = async () => {
    setError(undefined);
    try {
      onChange(await api.enableWebhook(bot.id));
      setDone('Webhook enabled: deliveries resume.');
    } catch (err) {
      setError(err);
    }
  };
  const toggle = (u: string) => setUpdates(updates.includes(u) ? updates.filter((x) => x !== u) : [...updates, u]);
  return (
    <>
      <section aria-labelledby="wh-state">
        <h2 id="wh-state">Webhook state</h2>
        <dl class="facts">
          <dt>Delivery</dt><dd>{bot.delivery_mode}</dd>
          <dt>URL</dt><dd>{bot.webhook ? <code>{bot.webhook.url}</code> : 'none (polling)'}</dd>
          {bot.webhook && <><dt>Secret</dt><dd id="webhook-secret-state">{bot.webhook.previous_secret_expires_at
            ? <>rotated: the previous secret also signs until {fmtTime(bot.webhook.previous_secret_expires_at)}</>
            : 'set (never shown again)'}</dd></>}
          {bot.webhook && <><dt>Max connections</dt><dd>{bot.webhook.max_connections}</dd></>}
          {bot.webhook && <><dt>Max deliveries per second</dt><dd>{bot.webhook.max_deliveries_per_second ?? 'no limit'}</dd></>}
          {bot.webhook && <><dt>State</dt><dd id="webhook-disabled">{bot.webhook.disabled ? <>disabled <span class="muted">({fmtTime(bot.webhook.disabled_at)})</span></> : 'enabled'}</dd></>}
          <dt>Pending updates</dt><dd id="pending-count">{state ? state.pending : '…'}</dd>
          <dt>Last error</dt><dd id="last-error">{state?.lastError ? <>{state.lastError} <span class="muted">({fmtTime(state.lastErrorAt)})</span></> : 'none'}</dd>
        </dl>
        {bot.webhook?.disabled && (
          <Alert kind="error">
            Deliveries are stopped: {bot.webhook.disabled_reason}. Updates keep queueing.{' '}
            <button type="button" onClick={enable}>Enable the webhook</button>
          </Alert>
        )}
      </section>
      <section>
        <h2>{bot.webhook ? 'Change the webhook' : 'Set a webhook'}</h2>
        {done && <Alert kind="ok">{done}</Alert>}
        <ErrorAlert error={error} fields={WEBHOOK_FIELDS} />
        <form onSubmit={save} noValidate>
          <Field id="wh-url" label="URL" type="url" value={url} onInput={setUrl} error={fieldError(error, 'url')}
            hint="https, on a public address (the service refuses private and internal ones)" />
          <div class="field">
            <label for="wh-secret">Secret token</label>
            <div class="row">
              <input id="wh-secret" autoComplete="off" spellcheck={false} value={secret} onInput={(e) => setSecret((e.target as HTMLInputElement).value)}
                aria-invalid={fieldError(error, 'secret_token') ? 'true' : undefined} aria-describedby="wh-secret-hint" />
              <button type="button" onClick={() => setSecret(newSecret())}>Generate</button>
              {secret && <CopyButton text={secret} label="Copy secret" />}
            </div>
            <small id="wh-secret-hint" class="muted">
              Signs each delivery (X-Service-Signature-V2). Copy it into your receiver: it is never shown again.
              {bot.webhook && ' Leave it empty to keep the current secret; a new one here replaces it at once (rotate below to keep both for a while).'}
            </small>
            {fieldError(error, 'secret_token') && <p class="field-error">{fieldError(error, 'secret_token')}</p>}
          </div>
          <fieldset>
            <legend>Allowed updates (none checked: all)</legend>
            {['message', 'edited_message', 'callback_query', 'inline_query'].map((u) => (
              <label class="check" key={u}><input type="checkbox" checked={updates.includes(u)} onChange={() => toggle(u)} /> {u}</label>
            ))}
            {fieldError(error, 'allowed_updates') && <p class="field-error">{fieldError(error, 'allowed_updates')}</p>}
          </fieldset>
          <Field id="wh-ips" label="Allowed IPs (optional)" value={ips} onInput={setIps} error={fieldError(error, 'allowed_ips')}
            hint="IPs or CIDRs, comma separated; empty: any public address" />
          <Field id="wh-max" label="Max connections" type="number" value={maxConn} onInput={setMaxConn} error={fieldError(error, 'max_connections')} hint="1 to 100" />
          <Field id="wh-rate" label="Max deliveries per second (optional)" type="number" value={perSecond} onInput={setPerSecond}
            error={fieldError(error, 'max_deliveries_per_second')} hint="1 to 10000; empty: no limit" />
          <label class="check"><input type="checkbox" checked={drop} onChange={(e) => setDrop((e.target as HTMLInputElement).checked)} /> Drop pending updates</label>
          <div class="row">
            <button type="submit" class="primary">Save webhook</button>
            {bot.webhook && !confirmDelete && <button type="button" class="danger" onClick={() => setConfirmDelete(true)}>Delete webhook…</button>}
          </div>
          {confirmDelete && (
            <div class="confirm" role="group" aria-labelledby="wh-delete-q">
              <p id="wh-delete-q"><strong>Delete the webhook?</strong> Deliveries stop and the bot goes back to polling (getUpdates);
                {drop ? ' pending updates are dropped.' : ' updates not yet delivered become readable by getUpdates.'}</p>
              <div class="row">
                <button type="button" class="danger" onClick={remove} ref={(b) => b?.focus()}>Delete the webhook</button>
                <button type="button" onClick={() => setConfirmDelete(false)}>Cancel</button>
              </div>
            </div>
          )}
        </form>
      </section>
      {bot.webhook && <RotateSecret bot={bot} onChange={onChange} />}
    </>
  );
}

const OVERLAPS = [['86400', '24 hours'], ['3600', '1 hour'], ['604800', '7 days'], ['0', 'none: the old secret stops at once']] as const;

/** Rotating the signing secret: the service makes the new one; the old one keeps signing for the overlap. */
function RotateSecret({ bot, onChange }: { bot: Bot; onChange: (b: Bot) => void }) {
  const [overlap, setOverlap] = useState('86400');
  const [made, setMade] = useState<{ secret: string; until?: string | null }>();
  const [error, setError] = useState<unknown>();
  const shown = useRef<HTMLElement>(null);
  useEffect(() => {
    if (!made) return;
    shown.current?.scrollIntoView({ block: 'center' });
    shown.current?.focus();
  }, [made]);
  const rotate = async () => {
    setError(undefined);
    try {
      const r = await api.rotateSecret(bot.id, Number(overlap));
      setMade({ secret: r.secret_token, until: r.bot?.webhook?.previous_secret_expires_at });
      if (r.bot) onChange(r.bot);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="wh-rotate">
      <h2 id="wh-rotate">Rotate the secret</h2>
      <p class="muted">The service makes a new secret. Until the overlap ends, every delivery carries two signatures in
        X-Service-Signature-V2 (the new one first, separated by a space), so your receiver keeps accepting deliveries whether it
        has the old secret or the new one: the SDK's verifier accepts either. Put the new secret in your receiver within the overlap.</p>
      <ErrorAlert error={error} />
      <div class="row">
        <label for="wh-overlap">Old secret stays valid for</label>
        <select id="wh-overlap" value={overlap} onChange={(e) => setOverlap((e.target as HTMLSelectElement).value)}>
          {OVERLAPS.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
        </select>
        <button type="button" onClick={rotate}>Rotate secret</button>
      </div>
      {made && (
        <div class="reveal" role="status" aria-live="polite">
          <p><strong>The new secret, shown this once:</strong></p>
          <div class="row">
            <code class="secret" id="rotated-secret" tabIndex={-1} ref={shown}>{made.secret}</code>
            <CopyButton text={made.secret} label="Copy secret" />
          </div>
          <p>{made.until ? <>The previous secret also signs until {fmtTime(made.until)}.</> : 'The previous secret no longer signs.'}</p>
        </div>
      )}
    </section>
  );
}

const STATUSES = ['', 'pending', 'retrying', 'succeeded', 'dead_letter'] as const;

function DeliveriesTab({ bot }: { bot: Bot }) {
  const [page, setPage] = useState(1);
  const [filter, setFilter] = useState('');
  const [data, setData] = useState<ListDeliveriesResponse>();
  const [error, setError] = useState<unknown>();
  const [note, setNote] = useState<string>();
  const [tick, setTick] = useState(0);
  const [updateId, setUpdateId] = useState('');
  const [since, setSince] = useState('');
  const [open, setOpen] = useState<string>();
  // A filter is applied as typed once it is whole: an update id of digits, a complete date and time.
  const more = {
    update_id: /^\d{1,16}$/.test(updateId.trim()) ? updateId.trim() : undefined,
    since: since && !Number.isNaN(Date.parse(since)) ? new Date(since).toISOString() : undefined,
  };
  // The log refreshes itself every 3 s while it is open.
  usePoll(() => { api.deliveries(bot.id, page, 20, filter as Delivery['status'] | '', more).then(setData, setError); }, 3000,
    [bot.id, page, tick, filter, more.update_id, more.since]);
  const recover = async () => {
    setNote(undefined);
    setError(undefined);
    try {
      const { recovered } = await api.recoverDeliveries(bot.id, new Date(0));
      setNote(recovered > 0 ? `Queued ${recovered} dead-letter ${recovered === 1 ? 'delivery' : 'deliveries'} again, oldest update first.` : 'No dead-letter deliveries to queue again.');
      setTick(tick + 1);
    } catch (err) {
      setError(err);
    }
  };
  const retry = async (d: Delivery) => {
    setNote(undefined);
    setError(undefined);
    try {
      const after = await api.retryDelivery(bot.id, d.id);
      setNote(`Retried update ${d.update_id}: ${after.status.replace(/_/g, ' ')}${after.last_status_code ? `, HTTP ${after.last_status_code}` : ''}${after.last_error && after.last_error !== `HTTP ${after.last_status_code}` ? `, ${after.last_error}` : ''}.`);
      setTick(tick + 1);
    } catch (err) {
      setError(err);
    }
  };
  const items = data?.items ?? [];
  return (
    <section>
      <h2>Deliveries</h2>
      {bot.delivery_mode !== 'webhook' && <Alert kind="info">The bot is polling: deliveries are made only in webhook mode.</Alert>}
      <div class="row">
        <label for="dl-filter">Status</label>
        <select id="dl-filter" value={filter} onChange={(e) => { setFilter((e.target as HTMLSelectElement).value); setPage(1); }}>
          {STATUSES.map((s) => <option key={s} value={s}>{s ? s.replace(/_/g, ' ') : 'All'}</option>)}
        </select>
        <label for="dl-update">Update id</label>
        <input id="dl-update" inputMode="numeric" size={12} value={updateId} onInput={(e) => { setUpdateId((e.target as HTMLInputElement).value); setPage(1); }} />
        <label for="dl-since">Since</label>
        <input id="dl-since" type="datetime-local" value={since} onInput={(e) => { setSince((e.target as HTMLInputElement).value); setPage(1); }} />
        <button type="button" onClick={() => setTick(tick + 1)}>Refresh</button>
        {bot.delivery_mode === 'webhook' && <button type="button" onClick={recover}>Queue dead letters again</button>}
      </div>
      {data && <p class="muted" id="dl-retention">Refreshed every 3 s. Each attempt, and each delivery once it has succeeded or died, is kept
        for {spellSeconds(data.retention_seconds)} after its last attempt.</p>}
      {note && <Alert kind="ok">{note}</Alert>}
      <ErrorAlert error={error} />
      {data && items.length === 0 && <p class="muted">No deliveries{filter ? ` with status ${filter.replace(/_/g, ' ')}` : ''}.</p>}
      {items.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr><th>Update</th><th>Status</th><th><span class="sr-only">Action</span></th><th>Attempts</th><th>HTTP</th><th>Error</th><th>Duration</th><th>Last attempt</th><th>Next</th></tr>
            </thead>
            <tbody>
              {items.map((d) => [
                <tr key={d.id} data-update={d.update_id}>
                  <td>{d.update_id}</td>
                  <td><Badge value={d.status} /></td>
                  <td>{d.status !== 'succeeded' && <button type="button" aria-label={`Retry update ${d.update_id}`} onClick={() => retry(d)}>Retry</button>}</td>
                  <td>
                    <button type="button" class="link" aria-expanded={open === d.id} aria-controls={`attempts-${d.id}`}
                      onClick={() => setOpen(open === d.id ? undefined : d.id)}>
                      {d.attempts}<span class="sr-only"> attempts of update {d.update_id}</span> <span aria-hidden="true">{open === d.id ? '▾' : '▸'}</span>
                    </button>
                  </td>
                  <td>{d.last_status_code ?? '—'}</td>
                  <td class="wrap">{d.last_error ?? '—'}</td>
                  <td>{d.last_duration_ms !== undefined ? `${d.last_duration_ms} ms` : '—'}</td>
                  <td>{fmtTime(d.last_attempt_at)}</td>
                  <td>{fmtTime(d.next_attempt_at)}</td>
                </tr>,
                open === d.id && (
                  <tr key={`${d.id}-attempts`} class="attempts-row">
                    <td colSpan={9} id={`attempts-${d.id}`}><div class="attempts-panel"><Attempts bot={bot} delivery={d} /></div></td>
                  </tr>
                ),
              ])}
            </tbody>
          </table>
        </div>
      )}
      <Pager pagination={data?.pagination} onPage={setPage} />
    </section>
  );
}

/** "3 days", "1 hour", "90 seconds": a retention as people say it. */
function spellSeconds(s: number): string {
  const units: [number, string][] = [[86_400, 'day'], [3600, 'hour'], [60, 'minute'], [1, 'second']];
  for (const [n, name] of units) if (s >= n && s % n === 0) return `${s / n} ${name}${s / n === 1 ? '' : 's'}`;
  return `${s} seconds`;
}

/** Headers as a definition list (names as sent, lowercase). */
function HeaderList({ headers }: { headers: Record<string, string> }) {
  const entries = Object.entries(headers);
  if (entries.length === 0) return <p class="muted">none</p>;
  return <dl class="headers">{entries.map(([k, v]) => [<dt key={`k-${k}`}>{k}</dt>, <dd key={`v-${k}`}><code>{v}</code></dd>])}</dl>;
}

const ATTEMPTS_PER_PAGE = 20;

/** One delivery's attempts, newest first, refreshed while shown, a page at a time: what was sent, what came back. */
function Attempts({ bot, delivery }: { bot: Bot; delivery: Delivery }) {
  const [data, setData] = useState<ListDeliveryAttemptsResponse>();
  const [error, setError] = useState<unknown>();
  const [page, setPage] = useState(1);
  usePoll(() => { api.deliveryAttempts(bot.id, delivery.id, page, ATTEMPTS_PER_PAGE).then(setData, setError); }, 3000,
    [bot.id, delivery.id, delivery.attempts, page]);
  if (error) return <ErrorAlert error={error} />;
  if (!data) return <p class="muted">Loading attempts…</p>;
  if (data.items.length === 0) return <p class="muted">No attempt recorded (attempts are kept {spellSeconds(data.retention_seconds)}).</p>;
  // Numbered from the first attempt: the newest is the total, on every page.
  const first = (data.pagination?.total ?? data.items.length) - (page - 1) * ATTEMPTS_PER_PAGE;
  return (
    <>
      <ol class="attempts" aria-label={`Attempts of update ${delivery.update_id}, newest first`}>
        {data.items.map((a, i) => (
          <li key={a.id} class="attempt" data-ok={a.ok ? 'true' : 'false'} value={first - i}>
            <p class="attempt-head">
              <Badge value={a.ok ? 'succeeded' : 'failed'} /> {fmtTime(a.attempted_at)} · {a.trigger} · {a.duration_ms} ms
              {a.response ? <> · HTTP {a.response.status_code}</> : null}
              {a.error && a.error !== `HTTP ${a.response?.status_code}` ? <> · <span class="attempt-error">{a.error}</span></> : null}
            </p>
            <details>
              <summary>Request sent</summary>
              <p><code class="wrap">POST {a.request?.url}</code></p>
              <HeaderList headers={a.request?.headers ?? {}} />
              <pre class="body">{a.request?.body}</pre>
            </details>
            <details>
              <summary>{a.response ? `Answer: HTTP ${a.response.status_code}` : 'No answer'}</summary>
              {a.response ? (
                <>
                  <HeaderList headers={a.response.headers ?? {}} />
                  <pre class="body">{a.response.body || '(empty body)'}</pre>
                  {a.response.body_truncated && <p class="muted">Only the first 4 KiB of the body is kept.</p>}
                </>
              ) : <p>{a.error ?? 'The request got no answer.'}</p>}
            </details>
          </li>
        ))}
      </ol>
      {(data.pagination?.total ?? 0) > ATTEMPTS_PER_PAGE && <Pager pagination={data.pagination} onPage={setPage} label={`Pages of the attempts of update ${delivery.update_id}`} />}
    </>
  );
}

interface Sample { t: number; calls: number; errors: number; avg?: number; max: number }

function MetricsTab({ bot }: { bot: Bot }) {
  const [windowS, setWindowS] = useState(3600);
  const [m, setM] = useState<BotMetrics>();
  const [error, setError] = useState<unknown>();
  usePoll(() => {
    api.metrics(bot.id, windowS).then((x) => {
      setM(x);
      setError(undefined);
    }, setError);
  }, 2000, [bot.id, windowS]);
  // The server's per-minute history of the window (not samples taken while the page is open).
  const s: Sample[] = (m?.series ?? []).map((b) => ({
    t: Date.parse(b.start ?? '') / 1000, calls: b.calls, errors: b.errors, avg: b.avg_latency_ms, max: b.max_latency_ms,
  }));
  const per = m?.bucket_seconds && m.bucket_seconds > 60 ? `per ${m.bucket_seconds / 60} minutes` : 'per minute';
  // Always in the API's answer; optional in its types, as every message field: absent reads as none.
  const updates = m?.updates ?? { pending: 0, delivered: 0, dead: 0 };
  const webhook = m?.webhook ?? { attempts: 0, succeeded: 0, failed: 0, max_latency_ms: 0 };
  const quota = m?.quota;
  return (
    <section>
      <div class="row spread">
        <h2>Metrics</h2>
        <div class="row">
          <label for="m-window">Window</label>
          <select id="m-window" value={windowS} onChange={(e) => setWindowS(Number((e.target as HTMLSelectElement).value))}>
            <option value={300}>5 minutes</option>
            <option value={3600}>1 hour</option>
            <option value={86400}>24 hours</option>
          </select>
        </div>
      </div>
      <ErrorAlert error={error} />
      {m && (
        <>
          <div class="stats">
            <Stat label="Calls" value={m.calls_total} id="m-calls" />
            <Stat label="Errors" value={m.errors_total} id="m-errors" />
            <Stat label="Pending updates" value={updates.pending} />
            <Stat label="Delivered" value={updates.delivered} />
            <Stat label="Dead" value={updates.dead} />
            <Stat label="Webhook attempts" value={webhook.attempts} id="m-attempts" />
            <Stat label="Success rate" value={webhook.success_rate === undefined ? '—' : `${Math.round(webhook.success_rate * 100)}%`} />
            <Stat label="Avg latency" value={webhook.avg_latency_ms === undefined ? '—' : `${Math.round(webhook.avg_latency_ms)} ms`} />
          </div>
          <div class="quota">
            <h3>Daily quota</h3>
            {quota && (quota.unlimited ? <p>No quota applies. {quota.used} calls today.</p> : (
              <>
                <meter min={0} max={quota.limit} value={quota.used} aria-label="Quota used" />
                <p>{quota.used} used, {quota.remaining} remaining of {quota.limit}; resets {fmtTime(quota.resets_at)}</p>
              </>
            ))}
            {m.rate_limit && <p class="muted">Rate limit: {m.rate_limit.limit} calls per {m.rate_limit.window_seconds} s</p>}
          </div>
          <div class="charts">
            <figure>
              <figcaption>Calls and errors, {per}</figcaption>
              <LineChart x={s.map((p) => p.t)} series={[{ label: 'calls', values: s.map((p) => p.calls), color: '#2563eb' }, { label: 'errors', values: s.map((p) => p.errors), color: '#dc2626' }]} />
            </figure>
            <figure>
              <figcaption>Webhook latency, ms (average and slowest), {per}</figcaption>
              <LineChart x={s.map((p) => p.t)} series={[{ label: 'avg ms', values: s.map((p) => p.avg ?? null), color: '#059669' }, { label: 'max ms', values: s.map((p) => p.max), color: '#d97706' }]} />
            </figure>
            <figure>
              <figcaption>Calls by method</figcaption>
              <Bars data={m.calls_by_method ?? {}} />
            </figure>
            <figure>
              <figcaption>Errors by status</figcaption>
              <Bars data={m.errors_by_status ?? {}} kind="error" />
            </figure>
          </div>
        </>
      )}
    </section>
  );
}

function Stat({ label, value, id }: { label: string; value: string | number; id?: string }) {
  return <div class="stat"><span class="muted">{label}</span><strong id={id}>{value}</strong></div>;
}

interface Sent { update_id: number; at: number; state: string }

function TestTab({ bot }: { bot: Bot }) {
  const [text, setText] = useState('Hello from the console');
  const [sent, setSent] = useState<Sent[]>([]);
  const [error, setError] = useState<unknown>();
  const sentRef = useRef(sent);
  sentRef.current = sent;
  // Watch the sent updates: their webhook deliveries, or the polling queue.
  usePoll(() => {
    if (sentRef.current.length === 0) return;
    if (bot.delivery_mode === 'webhook') {
      api.deliveries(bot.id, 1, 100).then((d) => {
        setSent(sentRef.current.map((x) => {
          const dl = d.items.find((i) => i.update_id === x.update_id);
          if (!dl) return { ...x, state: 'waiting for its delivery' };
          // An HTTP failure's error is its status: said once ("HTTP 500", not "HTTP 500, HTTP 500").
          const error = dl.last_error === `HTTP ${dl.last_status_code}` ? undefined : dl.last_error;
          const detail = [dl.last_status_code && `HTTP ${dl.last_status_code}`, error, dl.last_duration_ms !== undefined && `${dl.last_duration_ms} ms`].filter(Boolean).join(', ');
          return { ...x, state: `${dl.status.replace(/_/g, ' ')}${detail ? ` (${detail})` : ''}` };
        }));
      }, () => {});
    } else {
      api.metrics(bot.id, 300).then((m) => {
        setSent(sentRef.current.map((x) => ({ ...x, state: `in the polling queue: ${m.updates?.pending ?? 0} pending, ${m.updates?.delivered ?? 0} handed to getUpdates in 5 min` })));
      }, () => {});
    }
  }, 1000, [bot.id, bot.delivery_mode]);
  if (bot.review_status !== 'approved') return <Alert kind="info">Test updates can be sent once the bot is approved.</Alert>;
  const send = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      const r = await api.testUpdate(bot.id, text);
      setSent([{ update_id: r.update_id, at: Date.now(), state: 'stored' }, ...sent].slice(0, 10));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section>
      <h2>Send a test message</h2>
      <p class="muted">A message from a test user, delivered to the bot like any other ({bot.delivery_mode === 'webhook' ? 'POSTed to its webhook' : 'read with getUpdates'}).</p>
      <ErrorAlert error={error} fields={['text']} />
      <form onSubmit={send} noValidate>
        <Field id="t-text" label="Text" value={text} onInput={setText} error={fieldError(error, 'text')} />
        <button type="submit" class="primary">Send test message</button>
      </form>
      {sent.length > 0 && (
        <ul class="sent" aria-live="polite">
          {sent.map((x) => <li key={x.update_id} data-update={x.update_id}>Update <strong>{x.update_id}</strong>: <span class="state">{x.state}</span></li>)}
        </ul>
      )}
      <TestChat bot={bot} refreshKey={sent[0]?.update_id ?? 0} />
    </section>
  );
}

export { ApiFailure };
