// The browser test's host page (harness/main.tsx), built with the same Vite plugins the
// plugin tooling's own config uses, from Headlamp's frontend library in node_modules.
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'url';
import { defineConfig } from 'vite';
import svgr from 'vite-plugin-svgr';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  // (it warns that a docs helper's 'path' import is left out of the browser build)
  logLevel: 'error',
  // Headlamp's library reads process.env.NODE_ENV and a few REACT_APP_* settings.
  define: {
    global: 'globalThis',
    'process.env.NODE_ENV': JSON.stringify('production'),
    'process.env': '{}',
  },
  plugins: [
    svgr({
      svgrOptions: { prettier: false, svgo: false, titleProp: true, ref: true },
      include: '**/*.svg',
    }),
    react(),
  ],
  build: {
    outDir: fileURLToPath(new URL('../build/harness', import.meta.url)),
    emptyOutDir: true,
    chunkSizeWarningLimit: 20000,
    sourcemap: false,
    minify: false,
  },
});
