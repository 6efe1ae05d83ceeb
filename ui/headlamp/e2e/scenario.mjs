// The browser half of tests/component/ui/test_headlamp_plugin.py: headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core) on the pages the loopback
// stand-ins serve, one per user. It checks what the page shows, writes the screenshots,
// runs axe-core on the card and the dialog, and prints one JSON report on stdout for the
// Python side, which checks the server's side (the operation, the Event, the requests).
//
//   node e2e/scenario.mjs '{"plain": URL, "holder": URL, "namespace": NS, "cluster": NAME,
//                           "screenshots": DIR, "failures": DIR}'
//
// Every step is bounded (STEP_MS); a failed step exits 1 with the step's name, the page's
// text and a screenshot of it (failure-*.png in the folder "failures" names).

import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const CHROMIUM = process.env.ICHOR_CHROMIUM || '/usr/bin/chromium';
const STEP_MS = Number(process.env.ICHOR_UI_STEP_MS || 30000);
const args = JSON.parse(process.argv[2]);
const report = { steps: [], blocked: [], axe: {}, consoleErrors: [] };

// No request leaves the machine: names never resolve (the resolver rule) and anything
// not addressed to the stand-in's loopback address is aborted and counted.
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1',
];

const profile = mkdtempSync(join(tmpdir(), 'ichor-chromium-'));
let context;
let page;

async function step(name, fn) {
  const started = Date.now();
  try {
    const value = await fn();
    report.steps.push({ name, ms: Date.now() - started });
    return value;
  } catch (error) {
    const shot = join(args.failures || tmpdir(), `failure-${name.replace(/\W+/g, '-')}.png`);
    let text = '';
    try {
      await page.screenshot({ path: shot, fullPage: true });
      text = (await page.locator('body').innerText()).slice(0, 4000);
    } catch {
      // the page itself may be gone
    }
    throw new Error(
      `step "${name}" failed: ${error.message}\n--- page text ---\n${text}\n(screenshot: ${shot})`
    );
  }
}

async function open(url) {
  page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on('pageerror', error => report.consoleErrors.push(`pageerror: ${error.message}`));
  await page.goto(url);
  return page;
}

async function shoot(name, locator) {
  const path = join(args.screenshots, `${name}.png`);
  if (locator) {
    await locator.screenshot({ path });
  } else {
    await page.screenshot({ path, fullPage: true });
  }
  return path;
}

/** axe-core in the page, on one element, every rule axe runs by default. */
async function axeCheck(name, selector) {
  await page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
  const violations = await page.evaluate(async sel => {
    const result = await window.axe.run(document.querySelector(sel));
    return result.violations.map(v => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map(n => n.target.join(' ')),
    }));
  }, selector);
  report.axe[name] = violations;
}

function clusterUrl(base) {
  return `${base}/c/test/ichor/clusters/${args.namespace}/${args.cluster}`;
}

const card = () => page.locator('[data-ichor="versions-card"]');
const dialog = () => page.getByRole('dialog');
const plan = () => dialog().getByRole('region', { name: 'Plan' });
const overrideBox = () => dialog().getByRole('checkbox', { name: /Override this refusal/ });

/** Opens the Kubernetes dialog and chooses the first release the status does not offer. */
async function chooseRefused() {
  await step('open the Kubernetes dialog', async () => {
    await card().getByRole('button', { name: 'Upgrade Kubernetes' }).click();
    await dialog().waitFor();
    // the default choice is planned at once, and accepted
    await plan().getByText('The server accepts the plan').waitFor();
  });
  const version = await step('pick a version the rules refuse', async () => {
    await dialog().getByRole('combobox', { name: 'Version' }).click();
    const listbox = page.getByRole('listbox');
    await listbox.waitFor();
    const groups = await listbox.locator('.MuiAutocomplete-groupLabel').allInnerTexts();
    report.pickerGroups = groups;
    if (!report.pickerShot) {
      report.pickerShot = await shoot('dialog-picker', page.locator('.MuiDialog-container'));
    }
    const refused = listbox
      .getByRole('option')
      .filter({ hasText: /Cilium .* runs Kubernetes/ })
      .first();
    const label = (await refused.locator('p').first().innerText()).trim();
    await refused.click();
    return label;
  });
  await step('see the refusal', async () => {
    await plan().getByText('Refused by the admission webhook').waitFor();
  });
  return version;
}

try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
  });
  await context.route('**/*', route => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1') {
      return route.continue();
    }
    report.blocked.push(`${url.protocol}//${url.host}`);
    return route.abort('blockedbyclient');
  });

  // -- as the user without the verb ----------------------------------------------------
  await open(clusterUrl(args.plain));
  await step('the Versions card shows what the status offers', async () => {
    await card()
      .getByRole('row', { name: /Kubernetes/ })
      .getByText(/Patch available: v/)
      .waitFor();
    report.cardText = await card().innerText();
  });
  await shoot('versions-card', card());
  await step('axe on the card', () => axeCheck('card', '[data-ichor="versions-card"]'));

  report.plain = {};
  report.plain.version = await chooseRefused();
  await step('the checkbox is there, disabled, with its reason', async () => {
    await overrideBox().waitFor();
    if (!(await overrideBox().isDisabled())) {
      throw new Error('the override checkbox is enabled for a user without the verb');
    }
    const reasonId = await overrideBox().getAttribute('aria-describedby');
    report.plain.reason = await page.locator(`#${reasonId}`).innerText();
    report.plain.refusal = await dialog().getByTestId('ichor-refusal').innerText();
    report.plain.createDisabled = await dialog()
      .getByRole('button', { name: 'Create operation' })
      .isDisabled();
  });
  await shoot('dialog-refused-without-verb', dialog());
  await step('axe on the dialog', () => axeCheck('dialog', '[role="dialog"]'));
  await step('a typed version no override passes: refused, and no checkbox', async () => {
    await dialog().getByRole('combobox', { name: 'Version' }).fill('1.99.0');
    await page.getByRole('option', { name: 'Use v1.99.0' }).click();
    await dialog().getByTestId('ichor-refusal').filter({ hasText: 'v1.99.0' }).waitFor();
    report.plain.blockingRefusal = await dialog().getByTestId('ichor-refusal').innerText();
    report.plain.blockingCheckboxes = await overrideBox().count();
  });
  await shoot('dialog-not-overridable', dialog());
  await page.close();

  // -- as the holder of the verb -------------------------------------------------------
  await open(clusterUrl(args.holder));
  report.holder = {};
  report.holder.version = await chooseRefused();
  await step('the holder may tick the checkbox; the plan with override passes', async () => {
    await overrideBox().waitFor();
    if (await overrideBox().isDisabled()) {
      throw new Error('the override checkbox is disabled for a holder of the verb');
    }
    report.holder.refusal = await dialog().getByTestId('ichor-refusal').innerText();
    await overrideBox().check();
    await plan().getByText('The server accepts the plan').waitFor();
    report.holder.planWarnings = await plan().locator('.MuiAlert-standardWarning').allInnerTexts();
  });
  await shoot('dialog-override-holder', dialog());
  await step('create the operation', async () => {
    await dialog().getByRole('button', { name: 'Create operation' }).click();
    const created = dialog().getByRole('status').filter({ hasText: 'Created' });
    await created.waitFor();
    report.holder.created = await created.innerText();
  });
  await shoot('dialog-created', dialog());
  await step('the operation and the Warning Event show on the cluster', async () => {
    await dialog().getByRole('button', { name: 'Close' }).click();
    await dialog().waitFor({ state: 'detached' });
    const operations = page.getByRole('table', { name: /TalosOperations of/ });
    // (the message cell may say the same words while the executor checks it)
    const row = operations
      .locator('tbody tr')
      .filter({ hasText: `Kubernetes to ${report.holder.version}` })
      .first();
    await row.waitFor();
    report.holder.operationRow = await row.innerText();
    const override = page
      .getByRole('table', { name: /Events on TalosCluster/ })
      .locator('tr[data-event-reason="Override"]');
    await override.waitFor({ timeout: 2 * STEP_MS });
    report.holder.event = await override.innerText();
  });
  await shoot('cluster-after-override');

  await step("Headlamp's own page of the custom resource links to the card", async () => {
    await page.goto(
      `${args.holder}/c/test/customresources/talosclusters.ichor.dev/${args.namespace}/${args.cluster}`
    );
    const link = page.getByRole('link', { name: 'Versions and upgrades' });
    await link.waitFor();
    await shoot('headlamp-custom-resource-page');
    await link.click();
    await card().getByRole('row', { name: /Talos/ }).first().waitFor();
    report.customResourcePage = page.url();
  });
  await step('the fleet view says what needs attention', async () => {
    await page.goto(`${args.holder}/c/test/ichor/clusters`);
    await page
      .getByRole('table', { name: 'Talos clusters' })
      .getByText(`${args.namespace}/${args.cluster}`)
      .waitFor();
    const attention = page.getByRole('status').filter({ hasText: 'Patch updates are available' });
    await attention.waitFor();
    report.attention = await attention.innerText();
    report.fleetRow = await page
      .locator(`tr[data-cluster="${args.namespace}/${args.cluster}"]`)
      .innerText();
  });
  await shoot('fleet');
  await step('axe on the fleet', () => axeCheck('fleet', 'main'));
  report.ok = true;
} catch (error) {
  report.ok = false;
  report.error = error.message;
} finally {
  if (context) {
    await context.close();
  }
  rmSync(profile, { recursive: true, force: true });
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exitCode = report.ok ? 0 : 1;
}
