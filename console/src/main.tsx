import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiFailure, session } from './api';
import { BotsPage, CreateBotPage } from './bots';
import { BotPage } from './bot';
import { ReviewPage } from './review';
import { Alert } from './ui';
import { tokens } from './tokens';
import './styles.css';

/** The hash route: "#/bots/abc/webhook" → ["bots", "abc", "webhook"]. */
function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, '').split('?')[0]!.split('/').filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

export const go = (hash: string) => {
  location.hash = hash;
};

/** The page a signed-out visitor asked for, kept (in memory only) for after sign-in. */
let asked: string | null = null;
function wanted(): string {
  const h = asked;
  asked = null;
  return h ?? '#/bots';
}

/** Titles per section, so tabs and history say where they are. */
function titleOf(section: string, id?: string): string {
  if (section === 'review') return 'Review queue · Bot platform';
  if (section === 'bots' && id === 'new') return 'New bot · Bot platform';
  if (section === 'bots' && id) return document.title; // the bot page sets its own
  return 'My bots · Bot platform';
}

function SignIn({ notice }: { notice?: string }) {
  useEffect(() => {
    document.title = 'Sign in · Bot platform';
    if (location.hash.startsWith('#/') && location.hash !== '#/') asked = location.hash;
  }, []);
  const [jwt, setJwt] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const token = jwt.trim();
    if (!token) return setError('Paste an account JWT.');
    setBusy(true);
    setError(undefined);
    try {
      await api.probe(token);
      session.signIn(token);
      // Back to the page asked for before signing in (a deep link), else the bots.
      location.hash = wanted();
      dispatchEvent(new Event('signed-in'));
    } catch (err) {
      setError(err instanceof ApiFailure ? `The service refused this JWT: ${err.message}` : String(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="narrow" id="main">
      <h1>Sign in</h1>
      {notice && <Alert kind="warn">{notice}</Alert>}
      <p>
        Paste an account JWT. On the embedded default, <code>npm start</code> prints one-click sign-in links (and ready-made JWTs);
        <code>npm run -s mint-jwt -- --sub alice</code> mints more.
      </p>
      <form onSubmit={submit}>
        <label for="jwt">Account JWT</label>
        <textarea id="jwt" name="jwt" rows={5} autoComplete="off" spellcheck={false} value={jwt}
          onInput={(e) => setJwt((e.target as HTMLTextAreaElement).value)} aria-invalid={error ? 'true' : undefined}
          aria-describedby={error ? 'jwt-error' : undefined} />
        {error && <p class="field-error" id="jwt-error" role="alert">{error}</p>}
        <button type="submit" class="primary" disabled={busy}>Sign in</button>
      </form>
      <p class="muted">The JWT is kept in this tab's session storage only, and sent only to this service's API.</p>
    </main>
  );
}

function App() {
  const route = useRoute();
  const [jwt, setJwt] = useState(session.jwt);
  const [notice, setNotice] = useState<string>();
  const [admin, setAdmin] = useState(false);
  const [exchanging, setExchanging] = useState(() => location.hash.startsWith('#sign-in='));
  useEffect(() => {
    if (jwt) document.title = titleOf(route[0] ?? 'bots', route[1]);
  }, [jwt, route[0], route[1]]);

  useEffect(() => {
    session.onExpired((message) => {
      setNotice(`You were signed out: ${message}. Sign in again.`);
      setJwt(null);
      location.hash = '#/';
    });
    const on = () => setJwt(session.jwt);
    addEventListener('signed-in', on);
    // The one-click local link: "#sign-in=<code>", exchanged once for a JWT, then
    // removed from the address bar and history.
    const m = /^#sign-in=([\w-]+)$/.exec(location.hash);
    if (m) {
      history.replaceState(null, '', location.pathname);
      api.localSignIn(m[1]!).then(
        ({ jwt }) => {
          session.signIn(jwt);
          setJwt(jwt);
          setNotice(undefined);
          location.hash = wanted();
        },
        (err) => setNotice(err instanceof ApiFailure ? err.message : String(err)),
      ).finally(() => setExchanging(false));
    }
    return () => removeEventListener('signed-in', on);
  }, []);

  // Sign out when the JWT's own expiry comes (the API would refuse it from then on).
  useEffect(() => {
    if (!jwt) return;
    setNotice(undefined);
    setAdmin(session.claimsAdmin());
    const exp = session.expiresAt();
    if (exp === undefined) return;
    const ms = exp * 1000 - Date.now();
    const expire = () => {
      session.signOut();
      setJwt(null);
      setNotice('Your session expired. Sign in again.');
    };
    if (ms <= 0) return expire();
    const t = setTimeout(expire, Math.min(ms, 2 ** 31 - 1));
    return () => clearTimeout(t);
  }, [jwt]);

  if (exchanging) return <main class="narrow" id="main"><p>Signing in…</p></main>;

  const signOut = () => {
    // A token the API handed over and not yet revealed would be lost: asked first.
    const waiting = tokens.unrevealed();
    if (waiting && !confirm(`A bot token waits to be revealed and is shown only once: signing out loses it. Sign out anyway?`)) return;
    session.signOut();
    setJwt(null);
    setAdmin(false);
    setNotice('You signed out.');
    location.hash = '#/';
  };

  const [section = 'bots', id, tab] = route;
  let page;
  if (!jwt) page = <SignIn notice={notice} />;
  else if (section === 'review') page = admin ? <ReviewPage /> : <main id="main"><Alert kind="warn">The review queue is for reviewers (an admin JWT).</Alert></main>;
  else if (section === 'bots' && id === 'new') page = <CreateBotPage />;
  else if (section === 'bots' && id) page = <BotPage id={id} tab={tab ?? 'overview'} />;
  else page = <BotsPage />;

  return (
    <>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById('main')?.focus(); }}>Skip to content</a>
      <header class="top">
        <a class="brand" href="#/bots">Bot platform</a>
        {jwt && (
          <nav aria-label="Main">
            <a href="#/bots" aria-current={section === 'bots' ? 'page' : undefined}>My bots</a>
            {admin && <a href="#/review" aria-current={section === 'review' ? 'page' : undefined}>Review queue</a>}
            <button type="button" class="link" onClick={signOut}>Sign out</button>
          </nav>
        )}
      </header>
      {page}
    </>
  );
}

render(<App />, document.getElementById('app')!);
