// Login: a SASL user of the cluster (PLAIN or SCRAM credentials, checked by the broker).
import { useState } from '../vendor/hooks.module.js';
import { html } from '../ui/html.js';
import { post, setCsrf } from '../api.js';
import { useReady } from '../ui/ready.js';

export function LoginPage({ onLogin }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useReady('login', true);

  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const answer = await post('/api/login', { user, password });
      setCsrf(answer.csrf);
      await onLogin(answer);
    } catch (err) {
      setError(err.status === 401 ? `Wrong user name or password (${err.code})` : `${err.code}: ${err.message}`);
    } finally {
      setBusy(false);
    }
  };

  return html`
    <form class="login card" onSubmit=${submit}>
      <h1>strata console</h1>
      <label>User
        <input data-testid="login-user" autocomplete="username" value=${user} autofocus
          onInput=${(e) => setUser(e.currentTarget.value)} />
      </label>
      <label>Password
        <input data-testid="login-password" type="password" autocomplete="current-password"
          value=${password} onInput=${(e) => setPassword(e.currentTarget.value)} />
      </label>
      <button type="submit" class="primary" data-testid="login-submit" disabled=${busy}>Log in</button>
      ${error && html`<p class="error" data-testid="login-error">${error}</p>`}
    </form>`;
}
