/**
 * The documented configuration table against the schema (src/config.ts): every setting
 * the schema knows has a row, a row names only real settings, and a row's default, read
 * by the setting's own parser, is the value the service takes when the setting is unset.
 * The table is found by its header wherever it lives: README.md or a page under docs/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isDeepStrictEqual } from 'node:util';
import { settingsSchema } from '../src/config.js';

const ROOT = path.join(import.meta.dirname, '..');
const HEADER = /^\|\s*Variable\s*\|\s*Default\s*\|/;

interface Row { file: string; line: number; names: string[]; defaultCell: string }

/** The rows of the table under HEADER, in README.md or docs/*.md (there must be exactly one such table). */
function configTable(): Row[] {
  const docs = path.join(ROOT, 'docs');
  const files = ['README.md', ...fs.readdirSync(docs).filter((f) => f.endsWith('.md')).map((f) => path.join('docs', f))];
  const tables: Row[][] = [];
  for (const file of files) {
    const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
    lines.forEach((header, at) => {
      if (!HEADER.test(header)) return;
      const rows: Row[] = [];
      for (let i = at + 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
        const cells = lines[i]!.split(/(?<!\\)\|/).slice(1, -1).map((c) => c.trim());
        rows.push({ file, line: i + 1, names: [...cells[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!), defaultCell: cells[1] ?? '' });
      }
      tables.push(rows);
    });
  }
  expect(tables, 'one configuration table ("| Variable | Default | ...") in README.md or docs/*.md').toHaveLength(1);
  return tables[0]!;
}

const shape = settingsSchema.shape as Record<string, { safeParse(v: unknown): { success: boolean; data?: unknown } }>;
/** What the service takes for a setting left unset (undefined: none, it is derived or optional). */
const defaultOf = (name: string) => shape[name]!.safeParse(undefined).data;
/** A cell that is one code span and nothing else: "`15m`". */
const bareLiteral = (cell: string) => /^`[^`]+`$/.test(cell);

describe('the configuration table', () => {
  const rows = configTable();
  const names = Object.keys(shape);
  const byName = new Map(rows.flatMap((r) => r.names.map((n) => [n, r] as const)));

  it('names every setting of the schema', () => {
    expect(names.filter((n) => !byName.has(n))).toEqual([]);
  });

  it('names only settings of the schema', () => {
    const unknown = rows.flatMap((r) => r.names.filter((n) => !(n in shape)).map((n) => `${r.file}:${r.line} ${n}`));
    expect(unknown).toEqual([]);
    for (const r of rows) expect(r.names.length, `${r.file}:${r.line}`).toBeGreaterThan(0);
  });

  it("gives each setting's default as the service takes it", () => {
    const wrong: string[] = [];
    for (const name of names) {
      const row = byName.get(name);
      if (!row) continue;
      const cell = row.defaultCell;
      const where = `${row.file}:${row.line} ${name} "${cell}"`;
      const taken = defaultOf(name);
      if (taken === undefined) {
        // No default of its own: the row says in words what applies (derived from another
        // setting, created at start, or none), not a value.
        if (bareLiteral(cell) && !names.some((other) => other !== name && cell.includes(other))) wrong.push(`${where}: no default in the schema`);
        continue;
      }
      // "–" for an empty default; else the cell starts with the default as one would set it.
      const literal = /^`([^`]*)`/.exec(cell)?.[1] ?? (/^–(\s|$)/.test(cell) ? '' : undefined);
      if (literal === undefined) {
        wrong.push(`${where}: the default ${JSON.stringify(taken)} is not given first, as a literal`);
        continue;
      }
      const parsed = shape[name]!.safeParse(literal);
      if (!parsed.success || !isDeepStrictEqual(parsed.data, taken)) wrong.push(`${where}: "${literal}" is not the default (${JSON.stringify(taken)})`);
    }
    expect(wrong).toEqual([]);
  });
});
