/**
 * The upgrade dialog as a view of its state: the picker (or the plain input with the
 * reason when the list is unavailable), the plan as the server answered it, the override
 * checkbox, and the create. Every verdict shown here is the server's (see UpgradeDialog).
 */

import {
  Alert,
  AlertTitle,
  Autocomplete,
  Box,
  Button,
  Checkbox,
  CircularProgress,
  Dialog,
  DialogActions,
  DialogContent,
  DialogTitle,
  FormControlLabel,
  FormHelperText,
  TextField,
  Typography,
} from '@mui/material';
import { Component, COMPONENT_NAMES } from '../api-types';
import { OverrideControl } from '../mapping/access';
import { ChoiceOption, withTyped } from '../mapping/choices';
import { PlanAnswer } from '../mapping/plan';
import { ListState } from '../mapping/versions';

export type PlanView =
  | { status: 'idle' }
  | { status: 'planning'; what: string }
  | { status: 'done'; what: string; answer: PlanAnswer };

export type CreateView =
  | { status: 'idle' }
  | { status: 'creating' }
  | { status: 'done'; answer: PlanAnswer & { name?: string } };

export interface UpgradeDialogViewProps {
  open: boolean;
  /** ``namespace/name`` */
  cluster: string;
  component: Component;
  running: string;
  list: ListState;
  options: ChoiceOption[];
  selected: ChoiceOption | null;
  input: string;
  inputError?: string;
  plan: PlanView;
  override: OverrideControl;
  overrideChecked: boolean;
  create: CreateView;
  /** ``typing``: the person typed (the picker's choice is dropped). */
  onInput: (text: string, typing: boolean) => void;
  onSelect: (option: ChoiceOption | null) => void;
  onOverride: (checked: boolean) => void;
  onCreate: () => void;
  onClose: () => void;
  /** Stories and tests render it in place rather than in a portal. */
  disablePortal?: boolean;
}

function Picker(props: UpgradeDialogViewProps) {
  const { options, selected, input, inputError, list, onInput, onSelect } = props;
  const shown = withTyped(options, input);
  return (
    <Autocomplete<ChoiceOption, false, false, false>
      id="ichor-version-picker"
      options={shown}
      value={selected}
      inputValue={input}
      onInputChange={(_, text, reason) => {
        // Typing drops the choice; MUI then "resets" the input to the empty choice's
        // label, which would erase what was typed.
        if (reason === 'reset' && text === '' && !selected) {
          return;
        }
        onInput(text, reason === 'input');
      }}
      onChange={(_, option) => onSelect(option)}
      groupBy={option => (option.group === 'Typed' ? 'Typed version' : option.group)}
      getOptionLabel={option => option.version}
      filterOptions={all => all}
      isOptionEqualToValue={(a, b) => a.version === b.version && a.group === b.group}
      disablePortal={props.disablePortal}
      renderOption={(attributes, option) => {
        const { key, ...rest } = attributes as typeof attributes & { key: string };
        return (
          <li key={key} {...rest}>
            <Box>
              <Typography>{option.label}</Typography>
              {option.note && (
                <Typography variant="body2" color="text.secondary">
                  {option.note}
                </Typography>
              )}
            </Box>
          </li>
        );
      }}
      renderInput={params => (
        <TextField
          {...params}
          label="Version"
          error={!!inputError}
          helperText={
            inputError ??
            (list.reason
              ? `Note: ${list.reason}`
              : 'Pick a choice, or type a version and choose "Use vX.Y.Z".')
          }
        />
      )}
    />
  );
}

function PlainInput(props: UpgradeDialogViewProps) {
  return (
    <>
      <Alert severity="info" sx={{ mb: 2 }}>
        <AlertTitle>No choices to pick from</AlertTitle>
        The release list is unavailable: {props.list.reason}
      </Alert>
      <TextField
        id="ichor-version-input"
        label="Version"
        fullWidth
        value={props.input}
        onChange={event => props.onInput(event.target.value, true)}
        error={!!props.inputError}
        helperText={props.inputError ?? 'Type a version vX.Y.Z; the server plans it.'}
      />
    </>
  );
}

function Answer({ answer, what }: { answer: PlanAnswer; what: string }) {
  if (answer.kind === 'accepted') {
    return (
      <>
        <Alert severity="success">
          <AlertTitle>The server accepts the plan</AlertTitle>
          {what}: the dry run of this TalosOperation passed the admission webhook.
        </Alert>
        {answer.warnings.map(warning => (
          <Alert severity="warning" key={warning} sx={{ mt: 1 }}>
            {warning}
          </Alert>
        ))}
      </>
    );
  }
  if (answer.kind === 'refused') {
    return (
      <Alert severity="error">
        <AlertTitle>Refused by the admission webhook</AlertTitle>
        <span data-testid="ichor-refusal">{answer.message}</span>
      </Alert>
    );
  }
  return (
    <Alert severity="error">
      <AlertTitle>The plan could not be asked</AlertTitle>
      {answer.message}
    </Alert>
  );
}

function Plan({ plan }: { plan: PlanView }) {
  if (plan.status === 'idle') {
    return (
      <Typography color="text.secondary">
        Choose a version: the server's plan (a dry run of the create) shows here before anything
        runs.
      </Typography>
    );
  }
  if (plan.status === 'planning') {
    return (
      <Box sx={{ display: 'flex', gap: 1, alignItems: 'center' }}>
        <CircularProgress size={20} aria-label="Planning" />
        <Typography>Asking the server for the plan of {plan.what}…</Typography>
      </Box>
    );
  }
  return <Answer answer={plan.answer} what={plan.what} />;
}

function Created({ create, cluster }: { create: CreateView; cluster: string }) {
  if (create.status !== 'done') {
    return null;
  }
  const answer = create.answer;
  if (answer.kind === 'accepted') {
    const namespace = cluster.split('/')[0];
    return (
      <>
        <Alert severity="success" sx={{ mt: 2 }} role="status">
          <AlertTitle>Created</AlertTitle>
          TalosOperation {namespace}/{answer.name ?? '?'} was created; follow it under Operations.
        </Alert>
        {answer.warnings.map(warning => (
          <Alert severity="warning" key={warning} sx={{ mt: 1 }}>
            {warning}
          </Alert>
        ))}
      </>
    );
  }
  return (
    <Box sx={{ mt: 2 }}>
      <Typography fontWeight={600}>The create was not stored:</Typography>
      <Answer answer={answer} what="" />
    </Box>
  );
}

export function UpgradeDialogView(props: UpgradeDialogViewProps) {
  const { open, cluster, component, running, list, plan, override, overrideChecked, create } =
    props;
  const name = COMPONENT_NAMES[component];
  const accepted = plan.status === 'done' && plan.answer.kind === 'accepted';
  const done = create.status === 'done' && create.answer.kind === 'accepted';
  const reasonId = 'ichor-override-reason';
  return (
    <Dialog
      open={open}
      onClose={props.onClose}
      aria-labelledby="ichor-upgrade-title"
      fullWidth
      maxWidth="md"
      disablePortal={props.disablePortal}
    >
      <DialogTitle id="ichor-upgrade-title">
        Upgrade {name} of {cluster}
      </DialogTitle>
      <DialogContent>
        <Typography sx={{ mb: 2 }}>
          {name} runs {running}.
          {component === 'cni' &&
            ' Cilium moves only to the chart this Ichor embeds; it takes no version.'}
        </Typography>
        {component !== 'cni' &&
          (list.available ? <Picker {...props} /> : <PlainInput {...props} />)}
        <Box component="section" aria-label="Plan" aria-live="polite" sx={{ mt: 2 }}>
          <Typography variant="h6" component="h3" sx={{ mb: 1 }}>
            Plan
          </Typography>
          <Plan plan={plan} />
        </Box>
        {override.visible && (
          <Box sx={{ mt: 2 }}>
            <FormControlLabel
              control={
                <Checkbox
                  checked={overrideChecked}
                  disabled={override.disabled}
                  onChange={event => props.onOverride(event.target.checked)}
                  inputProps={{
                    'aria-describedby': override.reason ? reasonId : undefined,
                  }}
                />
              }
              label="Override this refusal (needs the override verb; recorded as a Warning Event on the cluster)"
            />
            {override.reason && (
              <FormHelperText id={reasonId} sx={{ ml: 4 }}>
                {override.reason}
              </FormHelperText>
            )}
          </Box>
        )}
        <Created create={create} cluster={cluster} />
      </DialogContent>
      <DialogActions>
        <Button onClick={props.onClose}>{done ? 'Close' : 'Cancel'}</Button>
        <Button
          variant="contained"
          onClick={props.onCreate}
          disabled={!accepted || create.status === 'creating' || done}
        >
          {create.status === 'creating' ? 'Creating…' : 'Create operation'}
        </Button>
      </DialogActions>
    </Dialog>
  );
}
