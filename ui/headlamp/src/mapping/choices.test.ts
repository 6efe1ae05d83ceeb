import { describe, expect, it } from 'vitest';
import { cluster } from '../fixtures/objects';
import { choiceOptions, defaultOption, typedVersion, withTyped } from './choices';

const status = cluster().status!;

describe('choiceOptions', () => {
  it('lists the groups in the CLI order, the default marked, then what is not offered', () => {
    const options = choiceOptions(
      status.upgradeChoices!.kubernetes,
      status.blockedReleases!.nearest,
      'kubernetes'
    );
    expect(options.map(o => [o.group, o.label])).toEqual([
      ['Patch', 'v1.36.7 (default)'],
      ['Not offered', 'v1.37.2'],
    ]);
    expect(options[1].note).toContain('Cilium 1.20.4 runs Kubernetes 1.33 to 1.36');
    expect(defaultOption(options)?.version).toBe('v1.36.7');
  });

  it('keeps a version once, under its first group, and the other component out', () => {
    const options = choiceOptions(
      {
        recommended: 'v1.14.5',
        patch: ['v1.14.5', 'v1.14.4'],
        nextMinor: ['v1.15.1'],
        default: 'v1.14.5',
        available: true,
      },
      [
        { component: 'kubernetes', version: 'v1.37.2', message: 'k' },
        { component: 'talos', version: 'v1.15.2', message: 'why' },
      ],
      'talos'
    );
    expect(options.map(o => `${o.group}:${o.version}`)).toEqual([
      'Recommended:v1.14.5',
      'Patch:v1.14.4',
      'Next minor:v1.15.1',
      'Not offered:v1.15.2',
    ]);
    expect(options.filter(o => o.isDefault).map(o => o.version)).toEqual(['v1.14.5']);
  });

  it('offers no group and no default when the list is unavailable', () => {
    const options = choiceOptions(
      { patch: ['v1.14.5'], default: 'v1.14.5', available: false, unavailableReason: 'off' },
      [],
      'talos'
    );
    expect(options).toEqual([]);
    expect(defaultOption(options)).toBeNull();
    expect(choiceOptions(undefined, undefined, 'talos')).toEqual([]);
  });
});

describe('typedVersion', () => {
  it.each([
    ['v1.37.1', 'v1.37.1'],
    ['1.37.1', 'v1.37.1'],
    ['  v1.15.0  ', 'v1.15.0'],
    ['v1.15.0-alpha.1', 'v1.15.0-alpha.1'],
  ])('takes %j as %s (form only: the plan judges it)', (input, version) => {
    expect(typedVersion(input)).toEqual({ version });
  });

  it.each(['1.37', 'v1.37', 'vv1.2.3', 'v01.2.3', 'latest', 'v1.2.3; rm -rf', 'x'.repeat(5000)])(
    'refuses %j by its form',
    input => {
      const typed = typedVersion(input);
      expect(typed.version).toBeUndefined();
      expect(typed.error).toMatch(/is not a version of the form vX\.Y\.Z$/);
      expect(typed.error!.length).toBeLessThan(120);
    }
  );

  it('says nothing for an empty input', () => {
    expect(typedVersion('  ')).toEqual({});
  });
});

describe('withTyped', () => {
  const options = choiceOptions(status.upgradeChoices!.talos, [], 'talos');

  it('adds a "Use vX.Y.Z" entry for a typed version the list lacks', () => {
    const shown = withTyped(options, '1.15.0');
    expect(shown.at(-1)).toEqual({
      version: 'v1.15.0',
      group: 'Typed',
      isDefault: false,
      label: 'Use v1.15.0',
    });
  });

  it('adds nothing for a listed version or a malformed one', () => {
    expect(withTyped(options, 'v1.14.4')).toEqual(options);
    expect(withTyped(options, 'v1.14')).toEqual(options);
  });
});
