/**
 * The upgrade dialog's behaviour: every choice of version (or of the override) asks the
 * server for the plan, a dry run of the TalosOperation create; the override checkbox
 * follows the plan's own words and the user's SelfSubjectAccessReview; "Create
 * operation" sends the very body the last accepted plan judged.
 */

import { useEffect, useMemo, useRef, useState } from 'react';
import { checkOverride, submitOperation } from '../api';
import { Component, COMPONENT_NAMES, TalosClusterObject } from '../api-types';
import { Access, overrideControl } from '../mapping/access';
import { ChoiceOption, choiceOptions, defaultOption, typedVersion } from '../mapping/choices';
import { operationBody } from '../mapping/plan';
import { listState, versionRows } from '../mapping/versions';
import { CreateView, PlanView, UpgradeDialogView } from './UpgradeDialogView';

export interface UpgradeDialogProps {
  cluster: TalosClusterObject;
  component: Component;
  open: boolean;
  onClose: () => void;
}

/** How long a typed version waits for more keys before it is planned. */
const TYPING_MS = 350;

export function UpgradeDialog({ cluster, component, open, onClose }: UpgradeDialogProps) {
  const namespace = cluster.metadata?.namespace ?? '';
  const name = cluster.metadata?.name ?? '';
  const status = cluster.status ?? {};
  const group = component === 'cni' ? null : status.upgradeChoices?.[component];
  const list = component === 'cni' ? { available: true } : listState(group);
  const options = useMemo(
    () =>
      component === 'cni' ? [] : choiceOptions(group, status.blockedReleases?.nearest, component),
    // the choices as the dialog opened: a status update does not move the picker
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [open, component]
  );
  const running =
    versionRows(cluster).find(r => r.key === (component === 'cni' ? 'cilium' : component))
      ?.running ?? 'unknown';

  const [selected, setSelected] = useState<ChoiceOption | null>(null);
  const [input, setInput] = useState('');
  const [overrideChecked, setOverrideChecked] = useState(false);
  const [plan, setPlan] = useState<PlanView>({ status: 'idle' });
  const [access, setAccess] = useState<Access>({ state: 'checking' });
  const [create, setCreate] = useState<CreateView>({ status: 'idle' });
  const asked = useRef(0);

  // On open: the server's default is chosen, and the verb is asked of the server once.
  useEffect(() => {
    if (!open) {
      return;
    }
    const chosen = defaultOption(options);
    setSelected(chosen);
    setInput(chosen?.version ?? '');
    setOverrideChecked(false);
    setPlan({ status: 'idle' });
    setCreate({ status: 'idle' });
    setAccess({ state: 'checking' });
    let current = true;
    checkOverride({ namespace, name }).then(answer => current && setAccess(answer));
    return () => {
      current = false;
    };
  }, [open, options, namespace, name]);

  const typed = typedVersion(input);
  const version =
    component === 'cni' ? null : list.available ? selected?.version ?? null : typed.version ?? null;
  const inputError = !list.available || !selected ? typed.error : undefined;
  const what =
    component === 'cni'
      ? 'Cilium to the chart this Ichor embeds'
      : `${COMPONENT_NAMES[component]} to ${version}`;

  // The plan: a dry run for the version and override chosen now; the last answer wins.
  useEffect(() => {
    if (!open || create.status !== 'idle') {
      return;
    }
    if (component !== 'cni' && !version) {
      setPlan({ status: 'idle' });
      return;
    }
    const ask = ++asked.current;
    const timer = setTimeout(
      () => {
        setPlan({ status: 'planning', what });
        submitOperation(
          namespace,
          operationBody(name, component, version, overrideChecked),
          true
        ).then(answer => {
          if (ask === asked.current) {
            setPlan({ status: 'done', what, answer });
          }
        });
      },
      list.available ? 0 : TYPING_MS
    );
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [open, component, version, overrideChecked, namespace, name]);

  const onSelect = (option: ChoiceOption | null) => {
    setSelected(option);
    setOverrideChecked(false);
  };
  const onInput = (text: string, typing: boolean) => {
    setInput(text);
    if (typing) {
      // a typed version is planned once it is chosen ("Use vX.Y.Z") or, without a
      // list, once it has the form of a version
      setSelected(null);
      setOverrideChecked(false);
    }
  };
  const onCreate = () => {
    setCreate({ status: 'creating' });
    submitOperation(
      namespace,
      operationBody(name, component, version, overrideChecked),
      false
    ).then(answer => setCreate({ status: 'done', answer }));
  };

  const planAnswer = plan.status === 'done' ? plan.answer : null;
  return (
    <UpgradeDialogView
      open={open}
      cluster={`${namespace}/${name}`}
      component={component}
      running={running}
      list={list}
      options={options}
      selected={selected}
      input={input}
      inputError={inputError}
      plan={plan}
      override={overrideControl(planAnswer, overrideChecked, access)}
      overrideChecked={overrideChecked}
      create={create}
      onInput={onInput}
      onSelect={onSelect}
      onOverride={setOverrideChecked}
      onCreate={onCreate}
      onClose={onClose}
    />
  );
}
