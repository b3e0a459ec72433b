// The console's shell: session bootstrap (GET /api/session), the hash router, the sidebar nav
// with the user and logout, and the login page on any 401 (console-api.md).
//
// Routes: #/cluster (default), #/topics, #/topics/<name>, #/topics/<name>/messages/<p>?...,
// #/groups, #/groups/<id>, #/transactions, #/charts, #/login. Segments are
// encodeURIComponent-ed; the query after '?' belongs to the page.
import { render } from './vendor/preact.module.js';
import { useLayoutEffect, useState } from './vendor/hooks.module.js';
import { html } from './ui/html.js';
import { get, post, onUnauthorized, setCsrf } from './api.js';
import { startNavigation } from './ui/ready.js';
import { ClusterPage } from './pages/cluster.js';
import { TopicsPage } from './pages/topics.js';
import { TopicPage } from './pages/topic.js';
import { MessagesPage } from './pages/messages.js';
import { GroupsPage } from './pages/groups.js';
import { GroupPage } from './pages/group.js';
import { TransactionsPage } from './pages/transactions.js';
import { ChartsPage } from './pages/charts.js';
import { LoginPage } from './pages/login.js';

const AFTER_LOGIN_KEY = 'strata:after-login';

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/cluster';
  const question = raw.indexOf('?');
  const path = question < 0 ? raw : raw.slice(0, question);
  const query = new URLSearchParams(question < 0 ? '' : raw.slice(question + 1));
  const parts = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { path, parts, query };
}

// The page for a route, and its nav section. Pages get the decoded segments and the query.
function pageFor({ parts, query }) {
  const [section, name, sub, partition] = parts;
  switch (section) {
    case undefined:
    case 'cluster':
      return { nav: 'cluster', view: html`<${ClusterPage} />` };
    case 'topics':
      if (name === undefined) return { nav: 'topics', view: html`<${TopicsPage} />` };
      if (sub === 'messages' && partition !== undefined) {
        return { nav: 'topics', view: html`<${MessagesPage} topic=${name} partition=${Number(partition)} query=${query} />` };
      }
      return { nav: 'topics', view: html`<${TopicPage} name=${name} />` };
    case 'groups':
      if (name === undefined) return { nav: 'groups', view: html`<${GroupsPage} />` };
      return { nav: 'groups', view: html`<${GroupPage} id=${name} />` };
    case 'transactions':
      return { nav: 'transactions', view: html`<${TransactionsPage} />` };
    case 'charts':
      return { nav: 'charts', view: html`<${ChartsPage} />` };
    default:
      return { nav: '', view: html`<div class="page"><h1>Not found</h1><p>No page at <code>#${location.hash.slice(1)}</code>.</p></div>` };
  }
}

const NAV = [
  ['cluster', 'Cluster'],
  ['topics', 'Topics'],
  ['groups', 'Consumer groups'],
  ['transactions', 'Transactions'],
  ['charts', 'Charts'],
];

function Nav({ active, session, onLogout }) {
  return html`
    <nav class="sidebar">
      <div class="brand">strata</div>
      <div class="node muted">node ${session.node_id ?? '?'}</div>
      <ul>
        ${NAV.map(([id, label]) => html`<li key=${id}><a href=${`#/${id}`} class=${active === id ? 'active' : ''}>${label}</a></li>`)}
      </ul>
      <div class="who">
        <span data-testid="nav-user">${session.user ?? 'anonymous'}</span>
        <button type="button" class="link" data-testid="logout" onClick=${onLogout}>log out</button>
      </div>
      <div class="cluster-id muted" title="cluster id">${session.cluster_id ?? ''}</div>
    </nav>`;
}

function App() {
  const [route, setRoute] = useState(parseHash);
  const [session, setSession] = useState(null); // null until /api/session answers

  const loadSession = async () => {
    try {
      const answer = await get('/api/session');
      setCsrf(answer.csrf);
      setSession(answer);
    } catch (err) {
      // A 401 went through the unauthorized handler; anything else still shows the shell.
      if (err.status !== 401) setSession({ user: null, login_required: false, error: err });
    }
  };

  // A layout effect runs right after the first commit; a plain effect would wait for a frame.
  useLayoutEffect(() => {
    const onHashChange = () => {
      startNavigation();
      setRoute(parseHash());
    };
    window.addEventListener('hashchange', onHashChange);
    onUnauthorized(() => {
      setSession({ user: null, login_required: true, csrf: '', loggedOut: true });
      if (!location.hash.startsWith('#/login')) {
        sessionStorage.setItem(AFTER_LOGIN_KEY, location.hash || '#/cluster');
        location.hash = '#/login';
      }
    });
    loadSession();
    return () => window.removeEventListener('hashchange', onHashChange);
  }, []);

  const onLogin = async () => {
    await loadSession();
    const back = sessionStorage.getItem(AFTER_LOGIN_KEY);
    sessionStorage.removeItem(AFTER_LOGIN_KEY);
    location.hash = back && !back.startsWith('#/login') ? back : '#/cluster';
  };

  const onLogout = async () => {
    try {
      await post('/api/logout', {});
    } catch {
      // Logged out or not, the next step asks the broker for the session again.
    }
    setCsrf('');
    setSession(null);
    // With logins required the session now answers 401 and the handler shows the login page;
    // without, the visitor gets a fresh anonymous session and stays where it was.
    await loadSession();
  };

  if (route.parts[0] === 'login') {
    return html`<main class="login-shell"><${LoginPage} onLogin=${onLogin} /></main>`;
  }
  // Pages wait for the session: /api/session is what hands an anonymous visitor its cookie,
  // and every other route refuses a request without one.
  if (session === null) return html`<main class="content"><p class="muted">Loading…</p></main>`;
  if (session.loggedOut) return html`<main class="content"><p>This console needs a login: <a href="#/login">log in</a>.</p></main>`;
  const { nav, view } = pageFor(route);
  return html`
    <div class="shell">
      <${Nav} active=${nav} session=${session} onLogout=${onLogout} />
      <main class="content" key=${route.path}>${view}</main>
    </div>`;
}

startNavigation();
render(html`<${App} />`, document.getElementById('app'));
