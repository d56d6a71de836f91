import { defineConfig } from 'vite';

// The build goes into the Go package that embeds it; the console is
// served at /ui/ by hermes serve. Preact's JSX runtime, without a plugin.
export default defineConfig({
  base: '/ui/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../../internal/api/console/dist',
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
  server: {
    proxy: {
      '/v1': 'http://127.0.0.1:8080',
      '/metrics': 'http://127.0.0.1:8080',
      '/readyz': 'http://127.0.0.1:8080',
      '/ui/config.json': 'http://127.0.0.1:8080',
    },
  },
});
