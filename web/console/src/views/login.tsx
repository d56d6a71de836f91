import { useState } from 'preact/hooks';
import { basic, bearer, login, setAuthorization, WhoAmI } from '../api';
import { errText, Field } from '../ui';

/** Sign in with a user and password or an API token; they are checked by
 * GET /v1/whoami and kept for this browser tab only. */
export function Login(props: { onLogin: (w: WhoAmI) => void }) {
  const [mode, setMode] = useState<'password' | 'token'>('password');
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const auth = mode === 'password' ? basic(user, password) : bearer(token);
      const w = await login(auth);
      if (!w.principal) throw new Error('these credentials name no principal');
      setAuthorization(auth);
      props.onLogin(w);
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <form onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">Sign in to Hermes</h1>
        <p>This node requires authentication. The console calls its APIs with the credentials you give here; they are kept for this tab only.</p>
        <fieldset class="choice">
          <legend>Sign in with</legend>
          <label>
            <input type="radio" name="mode" checked={mode === 'password'} onChange={() => setMode('password')} /> User and password
          </label>
          <label>
            <input type="radio" name="mode" checked={mode === 'token'} onChange={() => setMode('token')} /> API token
          </label>
        </fieldset>
        {mode === 'password' ? (
          <>
            <Field label="User">
              <input name="user" autocomplete="username" required value={user} onInput={(e) => setUser(e.currentTarget.value)} />
            </Field>
            <Field label="Password">
              <input
                name="password"
                type="password"
                autocomplete="current-password"
                required
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
              />
            </Field>
          </>
        ) : (
          <Field label="API token">
            <input name="token" type="password" autocomplete="off" required value={token} onInput={(e) => setToken(e.currentTarget.value)} />
          </Field>
        )}
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
