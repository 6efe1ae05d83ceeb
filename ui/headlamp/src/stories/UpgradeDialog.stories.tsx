import { Meta, StoryFn } from '@storybook/react';
import { UpgradeDialogView, UpgradeDialogViewProps } from '../components/UpgradeDialogView';
import { cluster, K8S_REFUSAL, OVERRIDABLE_DENIAL, UNKNOWN_DENIAL } from '../fixtures/objects';
import { Access, overrideControl } from '../mapping/access';
import { choiceOptions, defaultOption } from '../mapping/choices';
import { PlanAnswer } from '../mapping/plan';
import { listState } from '../mapping/versions';

export default {
  title: 'Ichor/UpgradeDialog',
  component: UpgradeDialogView,
} as Meta;

const status = cluster().status!;
const kubernetes = choiceOptions(
  status.upgradeChoices!.kubernetes,
  status.blockedReleases!.nearest,
  'kubernetes'
);
const notOffered = kubernetes.find(o => o.group === 'Not offered')!;
const denied: Access = {
  state: 'denied',
  reason:
    'You do not hold the RBAC verb override on talosclusters.ichor.dev/prod in namespace default; ask an administrator to bind you to a role that grants it.',
};
const refused = (message: string, overridable: boolean): PlanAnswer => ({
  kind: 'refused',
  webhook: 'talosoperation.ichor.dev',
  message,
  overridable,
});

/** The dialog in one state: what UpgradeDialog passes the view. */
function dialog(
  state: Partial<UpgradeDialogViewProps> & { access?: Access; answer?: PlanAnswer }
): StoryFn {
  const { access = { state: 'allowed' }, answer, ...rest } = state;
  const plan: UpgradeDialogViewProps['plan'] = answer
    ? { status: 'done', what: `Kubernetes to ${rest.selected?.version ?? 'v1.36.7'}`, answer }
    : rest.plan ?? { status: 'idle' };
  const props: UpgradeDialogViewProps = {
    open: true,
    cluster: 'default/prod',
    component: 'kubernetes',
    running: 'v1.36.6',
    list: listState(status.upgradeChoices!.kubernetes),
    options: kubernetes,
    selected: defaultOption(kubernetes),
    input: defaultOption(kubernetes)?.version ?? '',
    plan,
    override: overrideControl(
      plan.status === 'done' ? plan.answer : null,
      !!rest.overrideChecked,
      access
    ),
    overrideChecked: false,
    create: { status: 'idle' },
    onInput: () => undefined,
    onSelect: () => undefined,
    onOverride: () => undefined,
    onCreate: () => undefined,
    onClose: () => undefined,
    ...rest,
  };
  props.plan = plan;
  return () => <UpgradeDialogView {...props} />;
}

/** Opened: the default choice is planned. */
export const Planning = dialog({ plan: { status: 'planning', what: 'Kubernetes to v1.36.7' } });

/** The server accepts the default choice. */
export const Accepted = dialog({ answer: { kind: 'accepted', warnings: [] } });

/** A refused version, for a user without the verb: the checkbox is disabled with the reason. */
export const RefusedWithoutVerb = dialog({
  selected: notOffered,
  input: notOffered.version,
  answer: refused(OVERRIDABLE_DENIAL, true),
  access: denied,
});

/** The same refusal for a holder of the verb: the checkbox may be ticked. */
export const RefusedHolder = dialog({
  selected: notOffered,
  input: notOffered.version,
  answer: refused(OVERRIDABLE_DENIAL, true),
});

/** Ticked: the plan with override passes, and says so in its warning. */
export const Overridden = dialog({
  selected: notOffered,
  input: notOffered.version,
  overrideChecked: true,
  answer: {
    kind: 'accepted',
    warnings: [`override by olivia (cilium-kubernetes): ${K8S_REFUSAL}`.slice(0, 253) + '...'],
  },
});

/** Created under override: the operation's name and the server's warning. */
export const Created = dialog({
  selected: notOffered,
  input: notOffered.version,
  overrideChecked: true,
  answer: { kind: 'accepted', warnings: [] },
  create: {
    status: 'done',
    answer: {
      kind: 'accepted',
      name: 'prod-kubernetes-x7k2q',
      warnings: [`override by olivia (cilium-kubernetes): ${K8S_REFUSAL}`.slice(0, 253) + '...'],
    },
  },
});

/** A typed version unknown to this Ichor: refused, and no override passes it. */
export const UnknownVersionTyped = dialog({
  component: 'talos',
  running: 'v1.14.3',
  options: choiceOptions(status.upgradeChoices!.talos, [], 'talos'),
  selected: { version: 'v1.15.0', group: 'Typed', isDefault: false, label: 'Use v1.15.0' },
  input: 'v1.15.0',
  answer: refused(UNKNOWN_DENIAL, false),
});

/** No list: the plain input with the reason; a malformed version is refused by its form. */
export const ListUnavailable = dialog({
  list: { available: false, reason: 'the release check is off' },
  options: [],
  selected: null,
  input: 'v1.37',
  inputError: '"v1.37" is not a version of the form vX.Y.Z',
});

/** The request itself failed (RBAC on talosoperations), not a rule. */
export const PlanError = dialog({
  answer: {
    kind: 'error',
    status: 403,
    message:
      'Forbidden - talosoperations.ichor.dev is forbidden: User "eve" cannot create resource "talosoperations" in API group "ichor.dev" in the namespace "default"',
  },
});

/** Cilium: no version, the chart this Ichor embeds. */
export const Cilium = dialog({
  component: 'cni',
  running: '1.19.10',
  options: [],
  selected: null,
  input: '',
  plan: {
    status: 'done',
    what: 'Cilium to the chart this Ichor embeds',
    answer: { kind: 'accepted', warnings: [] },
  },
});
