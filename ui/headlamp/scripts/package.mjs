// The plugin as Headlamp plugins are distributed: an archive of one folder holding
// main.js and package.json (the layout `headlamp-plugin package` makes and Headlamp's
// plugin manager extracts), its sha256, and the Artifact Hub manifest that points at it.
//
//   node scripts/package.mjs [OUT]     (default OUT: package/)
//
// The archive is reproducible: fixed order, modes, owner and times, and a gzip header
// without a time, so the same dist/main.js gives the same checksum on any machine. The
// manifest is also written to ./artifacthub-pkg.yml (without OUT), the file Artifact
// Hub reads from this repository (its createdAt is kept while the version stays the same). No
// version-compat is claimed: the plugin is built and tested against the library of
// @kinvolk/headlamp-plugin 0.14.0, not against a Headlamp release (docs/ui.md).

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';

const here = resolve(new URL('..', import.meta.url).pathname);
// An explicit OUT (the tests) leaves the committed manifest alone.
const out = resolve(process.argv[2] || join(here, 'package'));
const release = !process.argv[2];
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
const main = join(here, 'dist', 'main.js');
if (!existsSync(main)) {
  console.error('dist/main.js is missing: run `make ui` (or npx headlamp-plugin build) first');
  process.exit(1);
}

// -- a minimal ustar writer: three entries, nothing that varies between machines --------
const BLOCK = 512;
const MTIME = 0o0; // 1970-01-01: the archive's content, not its build time

function octal(value, width) {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name, size, type, mode) {
  const block = Buffer.alloc(BLOCK, 0);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(mode, 8), 100, 8, 'ascii');
  block.write(octal(0, 8), 108, 8, 'ascii'); // uid
  block.write(octal(0, 8), 116, 8, 'ascii'); // gid
  block.write(octal(size, 12), 124, 12, 'ascii');
  block.write(octal(MTIME, 12), 136, 12, 'ascii');
  block.write('        ', 148, 8, 'ascii'); // checksum, as spaces while summing
  block.write(type, 156, 1, 'ascii');
  block.write('ustar\0', 257, 6, 'ascii');
  block.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const byte of block) {
    sum += byte;
  }
  block.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii');
  return block;
}

function file(name, data) {
  const padding = Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK, 0);
  return [header(name, data.length, '0', 0o644), data, padding];
}

const folder = pkg.name.replace(/@/g, '').replace(/\//g, '-');
const entries = [
  header(`${folder}/`, 0, '5', 0o755),
  ...file(`${folder}/main.js`, readFileSync(main)),
  ...file(`${folder}/package.json`, readFileSync(join(here, 'package.json'))),
  Buffer.alloc(2 * BLOCK, 0),
];
const archive = gzipSync(Buffer.concat(entries), { level: 9 });
const name = `${folder}-${pkg.version}.tar.gz`;
const checksum = createHash('sha256').update(archive).digest('hex');

mkdirSync(out, { recursive: true });
writeFileSync(join(out, name), archive);
writeFileSync(join(out, `${name}.sha256`), `${checksum}  ${name}\n`);

// -- the Artifact Hub manifest -----------------------------------------------------------
const committed = join(here, 'artifacthub-pkg.yml');
let createdAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
if (existsSync(committed)) {
  const previous = readFileSync(committed, 'utf8');
  const version = /^version: "?([^"\n]+)"?$/m.exec(previous)?.[1];
  const created = /^createdAt: "?([^"\n]+)"?$/m.exec(previous)?.[1];
  if (version === pkg.version && created) {
    createdAt = created;
  }
}
const archiveUrl = `https://github.com/ichor-dev/ichor/releases/download/headlamp-v${pkg.version}/${name}`;
const manifest = `# Artifact Hub's metadata for the Ichor Headlamp plugin, written by scripts/package.mjs
# (make ui-package): the checksum is the reproducible archive's, built from this tree.
version: "${pkg.version}"
name: ${folder}
displayName: Ichor
createdAt: "${createdAt}"
description: "${pkg.description.replace(/"/g, '\\"')}"
license: ${pkg.license}
homeURL: https://github.com/ichor-dev/ichor
keywords:
${pkg.keywords.map(k => `  - ${k}`).join('\n')}
links:
  - name: source
    url: https://github.com/ichor-dev/ichor/tree/main/ui/headlamp
  - name: documentation
    url: https://github.com/ichor-dev/ichor/blob/main/docs/ui.md
provider:
  name: Ichor
annotations:
  headlamp/plugin/archive-url: "${archiveUrl}"
  headlamp/plugin/archive-checksum: "SHA256:${checksum}"
  headlamp/plugin/distro-compat: "in-cluster,web,desktop"
`;
writeFileSync(join(out, 'artifacthub-pkg.yml'), manifest);
if (release) {
  writeFileSync(committed, manifest);
}
console.log(
  JSON.stringify({
    archive: join(out, name),
    sha256: checksum,
    manifest: release ? committed : join(out, 'artifacthub-pkg.yml'),
  })
);
