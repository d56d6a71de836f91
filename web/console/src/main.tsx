import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ConsoleConfig, hasAuthorization, setAuthorization, setUnauthenticatedHandler, WhoAmI } from './api';
import { Login } from './views/login';
import { Overview } from './views/overview';
import { Topics } from './views/topics';
import { TopicDetail } from './views/topic';
import { Messages } from './views/messages';
import { Groups } from './views/groups';
import { GroupDetail } from './views/group';
import { Rates } from './views/rates';
import { errText } from './ui';
import './style.css';

/** The page's route: the URL's fragment, e.g. #/topics/orders. */
function useRoute(): { path: string[]; query: URLSearchParams } {
  const parse = () => {
    const h = location.hash.replace(/^#/, '') || '/';
    const [p, q] = h.split('?');
    return { path: p.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q ?? '') };
  };
  const [r, setR] = useState(parse);
  useEffect(() => {
    const f = () => setR(parse());
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return r;
}

const nav: [string, string][] = [
  ['overview', 'Cluster'],
  ['topics', 'Topics'],
  ['messages', 'Messages'],
  ['groups', 'Groups'],
  ['rates', 'Rates'],
];

function App() {
  const [cfg, setCfg] = useState<ConsoleConfig | null>(null);
  const [me, setMe] = useState<WhoAmI | null>(null);
  const [error, setError] = useState('');
  const [needLogin, setNeedLogin] = useState(false);
  const route = useRoute();

  useEffect(() => {
    setUnauthenticatedHandler(() => {
      setAuthorization(null);
      setMe(null);
      setNeedLogin(true);
    });
    (async () => {
      try {
        const c = await api<ConsoleConfig>('GET', '/ui/config.json');
        setCfg(c);
        if (c.auth_required && !hasAuthorization()) {
          setNeedLogin(true);
          return;
        }
        setMe(await api<WhoAmI>('GET', '/v1/whoami'));
      } catch (e) {
        setError(errText(e));
      }
    })();
  }, []);

  useEffect(() => {
    const view = nav.find(([k]) => k === (route.path[0] ?? 'overview'));
    document.title = `${view ? view[1] : 'Hermes'} · Hermes console`;
  }, [route.path[0]]);

  if (needLogin) {
    return (
      <Login
        onLogin={(w) => {
          setMe(w);
          setNeedLogin(false);
        }}
      />
    );
  }
  if (!cfg || !me) {
    return <main class="loading">{error ? <p class="error" role="alert">{error}</p> : <p>Loading…</p>}</main>;
  }

  const section = route.path[0] ?? 'overview';
  let view;
  switch (section) {
    case 'topics':
      view = route.path[1] ? <TopicDetail name={route.path[1]} /> : <Topics />;
      break;
    case 'messages':
      view = <Messages query={route.query} />;
      break;
    case 'groups':
      view = route.path[1] ? <GroupDetail name={route.path[1]} /> : <Groups />;
      break;
    case 'rates':
      view = <Rates query={route.query} />;
      break;
    default:
      view = <Overview />;
  }
  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(e) => {
        e.preventDefault();
        document.getElementById('main')?.focus();
      }}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Hermes</span>
        <nav aria-label="Sections">
          {nav.map(([k, label]) => (
            <a href={'#/' + k} aria-current={section === k ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="who">
          {me.principal ? (
            <>
              Signed in as <strong>{me.principal}</strong>
            </>
          ) : (
            'Anonymous'
          )}
          {hasAuthorization() && (
            <button
              type="button"
              onClick={() => {
                setAuthorization(null);
                setMe(null);
                setNeedLogin(true);
              }}
            >
              Sign out
            </button>
          )}
          <a href="/graphql/ui">GraphiQL</a>
        </span>
      </header>
      <main id="main" tabIndex={-1} key={location.hash}>
        {view}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
