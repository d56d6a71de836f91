// Copies GraphiQL and React's browser builds from node_modules (installed
// from package-lock.json) and the page that starts them (graphiql/) into
// the Go package that embeds them, for /graphql/ui.
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const out = join(here, '..', '..', 'internal', 'api', 'graphql', 'graphiql');
const nm = join(here, 'node_modules');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const files = [
  ['graphiql/graphiql.min.js', 'graphiql.min.js'],
  ['graphiql/graphiql.min.css', 'graphiql.min.css'],
  ['react/umd/react.production.min.js', 'react.production.min.js'],
  ['react-dom/umd/react-dom.production.min.js', 'react-dom.production.min.js'],
];
for (const [from, to] of files) copyFileSync(join(nm, from), join(out, to));
for (const f of readdirSync(join(here, 'graphiql'))) copyFileSync(join(here, 'graphiql', f), join(out, f));

let notices = 'Third-party software in this directory, with its licence:\n';
for (const pkg of ['graphiql', 'react', 'react-dom']) {
  const meta = JSON.parse(readFileSync(join(nm, pkg, 'package.json'), 'utf8'));
  notices += `\n== ${pkg} ${meta.version} (${meta.license})\n\n` + readFileSync(join(nm, pkg, 'LICENSE'), 'utf8');
}
writeFileSync(join(out, 'THIRD_PARTY_LICENSES.txt'), notices);
console.log('GraphiQL files written to', out);
