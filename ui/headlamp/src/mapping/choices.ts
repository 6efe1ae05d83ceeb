/**
 * The upgrade picker's entries, from the choices the status records.
 *
 * The groups are the server's (Recommended, Patch, Next minor, newest first, the default
 * marked); "Not offered" are the nearest releases the status says the rules skip, with
 * its sentence; a typed version is checked for its form only, like the CLI's VERSION.
 * Whether any of them may run is the plan's answer, never this module's.
 */

import { BlockedLine, ChoiceGroup } from '../api-types';
import { listState } from './versions';

export type ChoiceGroupName = 'Recommended' | 'Patch' | 'Next minor' | 'Not offered' | 'Typed';

export interface ChoiceOption {
  version: string;
  group: ChoiceGroupName;
  isDefault: boolean;
  /** For "Not offered": the status's sentence saying why. */
  note?: string;
  /** What the picker shows. */
  label: string;
}

function option(version: string, group: ChoiceGroupName, isDefault: boolean, note?: string) {
  const label = group === 'Typed' ? `Use ${version}` : isDefault ? `${version} (default)` : version;
  const made: ChoiceOption = { version, group, isDefault, label };
  if (note) {
    made.note = note;
  }
  return made;
}

/** Every entry of the picker for one component, in the order the CLI lists them. */
export function choiceOptions(
  group: ChoiceGroup | null | undefined,
  blocked: BlockedLine[] | null | undefined,
  component: 'talos' | 'kubernetes'
): ChoiceOption[] {
  const seen = new Set<string>();
  const options: ChoiceOption[] = [];
  const state = listState(group);
  const def = state.available ? group?.default ?? null : null;
  const add = (version: string | null | undefined, name: ChoiceGroupName, note?: string) => {
    if (!version || seen.has(version)) {
      return;
    }
    seen.add(version);
    options.push(option(version, name, version === def, note));
  };
  if (state.available && group) {
    add(group.recommended, 'Recommended');
    (group.patch ?? []).forEach(v => add(v, 'Patch'));
    (group.nextMinor ?? []).forEach(v => add(v, 'Next minor'));
  }
  (blocked ?? [])
    .filter(line => line?.component === component)
    .forEach(line => add(line.version, 'Not offered', line.message));
  return options;
}

/** The entry chosen when the dialog opens: the server's default, else none. */
export function defaultOption(options: ChoiceOption[]): ChoiceOption | null {
  return options.find(o => o.isDefault) ?? null;
}

// Semantic version 2.0.0, with an optional leading v (the CLI's VERSION form).
const SEMVER =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export interface Typed {
  version?: string;
  error?: string;
}

/**
 * A version a person typed: its form only (``vX.Y.Z``, the v added when missing), as
 * ``ichor upgrade`` checks VERSION; the plan applies the rules.
 */
export function typedVersion(input: string): Typed {
  const text = input.trim();
  if (text === '') {
    return {};
  }
  if (text.length > 64 || !SEMVER.test(text)) {
    return {
      error: `"${text.slice(0, 64)}" is not a version of the form vX.Y.Z`,
    };
  }
  return { version: text.startsWith('v') ? text : `v${text}` };
}

/** The picker's entries with a "Use vX.Y.Z" entry for a typed version it lacks. */
export function withTyped(options: ChoiceOption[], input: string): ChoiceOption[] {
  const typed = typedVersion(input);
  if (!typed.version || options.some(o => o.version === typed.version)) {
    return options;
  }
  return [...options, option(typed.version, 'Typed', false)];
}
