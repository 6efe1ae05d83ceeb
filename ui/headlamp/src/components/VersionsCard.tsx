/**
 * The Versions card: what a TalosCluster runs, what its status offers, and the Upgrade
 * buttons. A view of the mapped status only (../mapping/versions.ts): the container
 * (IchorSections) reads the object and opens the dialog.
 */

import { SectionBox } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import {
  Box,
  Button,
  Chip,
  Table,
  TableBody,
  TableCell,
  TableHead,
  TableRow,
  Typography,
} from '@mui/material';
import { Component } from '../api-types';
import {
  AutoPatchSummary,
  BlockedSummary,
  CompatibilitySummary,
  VersionRow,
} from '../mapping/versions';

export interface VersionsCardProps {
  /** ``namespace/name`` */
  cluster: string;
  rows: VersionRow[];
  compatibility: CompatibilitySummary;
  blocked: BlockedSummary;
  autoPatch: AutoPatchSummary;
  /** "3 Nodes" and the like; absent when the status has no count. */
  nodes?: string;
  onUpgrade?: (component: Component) => void;
}

const COMPATIBILITY_COLOR = {
  compatible: 'success',
  incompatible: 'error',
  'unknown-version': 'error',
  'not-judged': 'default',
} as const;

function Running({ row }: { row: VersionRow }) {
  return (
    <>
      <Typography component="span" fontWeight={row.runningKnown ? 600 : 400}>
        {row.running}
      </Typography>
      {row.spec && (
        <Typography component="span" variant="body2" color="text.secondary">
          {' '}
          (spec {row.spec})
        </Typography>
      )}
      {row.detail && (
        <Typography variant="body2" color="text.secondary">
          {row.detail}
        </Typography>
      )}
    </>
  );
}

function Offered({ row }: { row: VersionRow }) {
  return (
    <>
      {row.hint && (
        <Chip size="small" variant="outlined" color="primary" label={row.hint} sx={{ mb: 0.5 }} />
      )}
      {row.note && (
        <Typography variant="body2" color="text.secondary">
          {row.note}
        </Typography>
      )}
      {!row.hint && !row.note && (
        <Typography variant="body2" color="text.secondary">
          —
        </Typography>
      )}
    </>
  );
}

export function VersionsCard(props: VersionsCardProps) {
  const { cluster, rows, compatibility, blocked, autoPatch, nodes, onUpgrade } = props;
  const titleId = `ichor-versions-${cluster.replace(/[^a-zA-Z0-9-]/g, '-')}`;
  return (
    <div data-ichor="versions-card">
      <SectionBox title="Versions">
        <Table size="small" aria-label={`Versions of TalosCluster ${cluster}`}>
          <TableHead>
            <TableRow>
              <TableCell component="th" scope="col">
                Component
              </TableCell>
              <TableCell component="th" scope="col">
                Runs
              </TableCell>
              <TableCell component="th" scope="col">
                Offered
              </TableCell>
              <TableCell component="th" scope="col">
                <span className="ichor-visually-hidden" style={visuallyHidden}>
                  Actions
                </span>
              </TableCell>
            </TableRow>
          </TableHead>
          <TableBody>
            {rows.map(row => (
              <TableRow key={row.key} data-row={row.key}>
                <TableCell component="th" scope="row">
                  {row.label}
                </TableCell>
                <TableCell>
                  <Running row={row} />
                </TableCell>
                <TableCell>
                  <Offered row={row} />
                </TableCell>
                <TableCell align="right">
                  {row.upgrade && onUpgrade && (
                    <Button
                      variant="outlined"
                      size="small"
                      onClick={() => onUpgrade(row.upgrade as Component)}
                      aria-label={`Upgrade ${row.label}`}
                    >
                      Upgrade
                    </Button>
                  )}
                </TableCell>
              </TableRow>
            ))}
          </TableBody>
        </Table>
        <Box id={titleId} sx={{ mt: 2, display: 'grid', gap: 1 }}>
          <Box>
            <Typography component="span" fontWeight={600}>
              Compatibility:{' '}
            </Typography>
            <Chip
              size="small"
              variant="outlined"
              color={COMPATIBILITY_COLOR[compatibility.state]}
              label={compatibility.label}
            />
            {compatibility.message && (
              <Typography variant="body2" color="text.secondary">
                {compatibility.message}
              </Typography>
            )}
          </Box>
          {nodes && (
            <Typography variant="body2">
              <strong>Nodes:</strong> {nodes}
            </Typography>
          )}
          <Box>
            <Typography component="span" fontWeight={600}>
              Auto-patch:{' '}
            </Typography>
            <Typography component="span">{autoPatch.label}</Typography>
            {autoPatch.detail && (
              <Typography variant="body2" color="text.secondary">
                {autoPatch.detail}
              </Typography>
            )}
          </Box>
          <Box>
            <Typography fontWeight={600}>
              Not offered{blocked.headline ? `: ${blocked.headline}` : ''}
            </Typography>
            {blocked.lines.length === 0 ? (
              <Typography variant="body2" color="text.secondary">
                {blocked.headline ? '—' : 'No newer release is known to be held back.'}
              </Typography>
            ) : (
              <ul style={{ margin: 0, paddingLeft: '1.25rem' }}>
                {blocked.lines.map(line => (
                  <li key={`${line.component}-${line.version}`}>
                    <Typography variant="body2">
                      <strong>
                        {line.component} {line.version}
                      </strong>
                      {line.blocker ? ` (${line.blocker})` : ''}: {line.message}
                    </Typography>
                  </li>
                ))}
              </ul>
            )}
          </Box>
          <Typography variant="body2" color="text.secondary">
            Path to a goal:{' '}
            <code>
              ichor upgrade plan {cluster.split('/')[1]} -n {cluster.split('/')[0]}
            </code>{' '}
            lists the order of upgrades; the status carries no path plan, and this page decides no
            rule.
          </Typography>
        </Box>
      </SectionBox>
    </div>
  );
}

const visuallyHidden: React.CSSProperties = {
  border: 0,
  clip: 'rect(0 0 0 0)',
  height: 1,
  margin: -1,
  overflow: 'hidden',
  padding: 0,
  position: 'absolute',
  whiteSpace: 'nowrap',
  width: 1,
};
