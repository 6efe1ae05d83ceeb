/**
 * Every story as a snapshot test and an accessibility check (axe-core), rendered the way
 * the plugin tooling's Storybook renders them: Headlamp's light theme around the story.
 * (The tooling's own storyshots are deprecated and skip; Storybook's portable stories
 * are its replacement.)
 */

// Headlamp's library first: its import cycles resolve in this order (see harness/main.tsx).
import '@kinvolk/headlamp-plugin/lib';
import { lightTheme } from '@kinvolk/headlamp-plugin/lib/components/App/defaultAppThemes';
import { createMuiTheme } from '@kinvolk/headlamp-plugin/lib/lib/themes';
import { ThemeProvider } from '@mui/material/styles';
import { composeStories } from '@storybook/react';
import { cleanup, render } from '@testing-library/react';
import axe from 'axe-core';
import { afterEach, describe, expect, it } from 'vitest';
import * as fleet from './stories/OperationsAndFleet.stories';
import * as dialog from './stories/UpgradeDialog.stories';
import * as card from './stories/VersionsCard.stories';

afterEach(cleanup);

// jsdom has no canvas; axe and Headlamp's library probe it (and say so on stderr).
HTMLCanvasElement.prototype.getContext = (() =>
  null) as typeof HTMLCanvasElement.prototype.getContext;

const theme = createMuiTheme(lightTheme);

// Page-level rules do not apply to one component rendered alone; jsdom cannot compute
// colours, so contrast is checked in the browser test (tests/component/ui).
const AXE_OPTIONS: axe.RunOptions = {
  rules: { region: { enabled: false }, 'color-contrast': { enabled: false } },
};

for (const [title, module] of [
  ['VersionsCard', card],
  ['UpgradeDialog', dialog],
  ['OperationsAndFleet', fleet],
] as const) {
  describe(title, () => {
    const stories = Object.entries(composeStories(module as any)) as [string, React.FC][];
    it('has stories', () => {
      expect(stories.length).toBeGreaterThan(1);
    });
    for (const [name, Story] of stories) {
      it(`${name} renders as its snapshot and passes axe`, async () => {
        // The dialog renders in a portal, as in Headlamp: the page is the body, and MUI
        // hides everything but the open dialog from assistive technology (aria-hidden).
        const { baseElement } = render(
          <ThemeProvider theme={theme}>
            <main>
              <Story />
            </main>
          </ThemeProvider>
        );
        expect(baseElement).toMatchSnapshot();
        const result = await axe.run(baseElement, AXE_OPTIONS);
        expect(
          result.violations.map(v => `${v.id}: ${v.nodes.map(n => n.target.join(' ')).join(', ')}`)
        ).toEqual([]);
      });
    }
  });
}
