/**
 * The Events on a TalosCluster, newest first and live: a passed refusal shows here as
 * the Warning Event ``Override`` the operator records.
 */

import { SectionBox } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import { Table, TableBody, TableCell, TableHead, TableRow, Typography } from '@mui/material';
import { EventRow } from '../mapping/events';

export function EventsView({ cluster, rows }: { cluster: string; rows: EventRow[] }) {
  return (
    <SectionBox title="Cluster events">
      {rows.length === 0 ? (
        <Typography color="text.secondary">No Event on {cluster}.</Typography>
      ) : (
        <Table size="small" aria-label={`Events on TalosCluster ${cluster}`}>
          <TableHead>
            <TableRow>
              {['Type', 'Reason', 'Message', 'Last seen'].map(h => (
                <TableCell key={h} component="th" scope="col">
                  {h}
                </TableCell>
              ))}
            </TableRow>
          </TableHead>
          <TableBody>
            {rows.map(row => (
              <TableRow key={row.key} data-event-reason={row.reason}>
                <TableCell>
                  <strong>{row.type}</strong>
                </TableCell>
                <TableCell>{row.reason}</TableCell>
                <TableCell>{row.message}</TableCell>
                <TableCell>
                  {row.time}
                  {row.count > 1 ? ` (×${row.count})` : ''}
                </TableCell>
              </TableRow>
            ))}
          </TableBody>
        </Table>
      )}
    </SectionBox>
  );
}
