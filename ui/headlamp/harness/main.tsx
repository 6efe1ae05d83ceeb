/**
 * A page that hosts the built plugin the way Headlamp's frontend does, for the browser
 * test: Headlamp's own plugin loader (fetchAndExecutePlugins, through its Plugins
 * component) fetches /plugins and runs dist/main.js against window.pluginLib; Headlamp's
 * own store, query client, theme and RouteSwitcher render the routes the plugin
 * registered. What is not Headlamp's is only the shell around them (no app bar, no
 * sidebar) and the backend, a loopback stand-in (tests/harness/headlamp.py) that serves
 * /config, /plugins and /clusters/<name>/... as one user.
 */

// First, as in Headlamp's app: the plugin library (window.pluginLib). Headlamp's library
// has import cycles around KubeObject; entered here, KubeObject is evaluated before the
// classes that extend it (entered through lib/k8s, it is not).
import '@kinvolk/headlamp-plugin/lib/plugin';
import '@kinvolk/headlamp-plugin/lib/i18n/config';
import { ThemeProvider } from '@mui/material/styles';
import CssBaseline from '@mui/material/CssBaseline';
import { QueryClientProvider } from '@tanstack/react-query';
import { SnackbarProvider } from 'notistack';
import { createRoot } from 'react-dom/client';
import { Provider } from 'react-redux';
import { BrowserRouter } from 'react-router-dom';
import RouteSwitcher from '@kinvolk/headlamp-plugin/lib/components/App/RouteSwitcher';
import { lightTheme } from '@kinvolk/headlamp-plugin/lib/components/App/defaultAppThemes';
import { queryClient } from '@kinvolk/headlamp-plugin/lib/lib/queryClient';
import { createMuiTheme } from '@kinvolk/headlamp-plugin/lib/lib/themes';
import Plugins from '@kinvolk/headlamp-plugin/lib/plugin/Plugins';
import { setConfig } from '@kinvolk/headlamp-plugin/lib/redux/configSlice';
import store from '@kinvolk/headlamp-plugin/lib/redux/stores/store';
import { setStore } from '@kinvolk/headlamp-plugin/lib/lib/router/createRouteURL';
import { useTypedSelector } from '@kinvolk/headlamp-plugin/lib/redux/hooks';

function Routes() {
  // Headlamp renders the routes once its plugins ran (pluginsLoaded).
  const loaded = useTypedSelector(state => state.plugins.loaded);
  return loaded ? <RouteSwitcher requiresToken={() => false} /> : null;
}

async function start() {
  // As Headlamp's entry point does: links by route name look routes up in the store.
  setStore(store);
  const config = await (await fetch('/config')).json();
  store.dispatch(
    setConfig({ clusters: Object.fromEntries(config.clusters.map((c: any) => [c.name, c])) })
  );
  createRoot(document.getElementById('root')!).render(
    <Provider store={store}>
      <QueryClientProvider client={queryClient}>
        <ThemeProvider theme={createMuiTheme(lightTheme)}>
          <CssBaseline />
          <SnackbarProvider>
            <BrowserRouter>
              <Plugins />
              <main style={{ padding: '16px 24px', maxWidth: 1280 }}>
                <Routes />
              </main>
            </BrowserRouter>
          </SnackbarProvider>
        </ThemeProvider>
      </QueryClientProvider>
    </Provider>
  );
}

start();
