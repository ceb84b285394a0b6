/** What both drivers share to write and read statements: multi-row texts and row makers. */

/** `(?, ?, …)` repeated `rows` times, for `width` values a row. */
export const valuesList = (width: number, rows: number) => Array(rows).fill(`(${Array(width).fill('?').join(', ')})`).join(', ');

/** `?, ?, …` n times: an IN list. */
export const marks = (n: number) => Array(n).fill('?').join(', ');

/** Sizes of the multi-row statements `n` rows are split into: powers of two, largest first, at most `max`. */
export function powerOfTwoChunks(n: number, max = 256): number[] {
  const sizes: number[] = [];
  while (n > 0) {
    let size = 1;
    while (size * 2 <= Math.min(n, max)) size *= 2;
    sizes.push(size);
    n -= size;
  }
  return sizes;
}

/** `rows` in power-of-two chunks (powerOfTwoChunks): each chunk's size and its rows' values in one list. */
export function inChunks(rows: readonly unknown[][], each: (size: number, params: unknown[]) => void): void {
  let at = 0;
  for (const size of powerOfTwoChunks(rows.length)) {
    each(size, rows.slice(at, at + size).flat());
    at += size;
  }
}

/**
 * A function making a row object of a statement's values, as the drivers would (a key
 * per column, in order; a repeated name keeps the last value), but as one object literal
 * of a fixed shape: about half the cost of the driver building each row key by key.
 * The names are the statement's own columns, each written as a quoted JSON string.
 */
export function rowMaker(names: string[], skip = 0): (values: unknown[]) => unknown {
  if (names.includes('__proto__')) throw new Error('a column named __proto__ cannot be read by name');
  const keys = names.map((n, i) => `${JSON.stringify(n)}: v[${i + skip}]`).join(', ');
  return new Function('v', `return { ${keys} };`) as (values: unknown[]) => unknown;
}

/** A bounded map of texts or compiled makers (the oldest goes once `max` are kept). */
export function boundedCache<V>(max: number) {
  const entries = new Map<string, V>();
  return {
    get: (key: string) => entries.get(key),
    set(key: string, value: V): V {
      if (entries.size >= max) entries.delete(entries.keys().next().value!);
      entries.set(key, value);
      return value;
    },
    clear: () => entries.clear(),
  };
}

/**
 * A select's text from its columns (each caller's constant list) and the rest of the
 * statement, made once per list and rest (`wrap`: how the columns are selected, e.g. as
 * one `json_array(...)`), not joined again on every read.
 */
export function selectTexts(wrap: (columns: string) => string = (c) => c) {
  const byColumns = new WeakMap<readonly string[], Map<string, string>>();
  return (columns: readonly string[], tail: string): string => {
    let byTail = byColumns.get(columns);
    if (!byTail) byColumns.set(columns, (byTail = new Map()));
    let text = byTail.get(tail);
    if (text === undefined) {
      // A caller's tails are its statements' constant texts; a list made per call would not be kept.
      if (byTail.size >= 64) byTail.clear();
      byTail.set(tail, (text = `SELECT ${wrap(columns.join(', '))} ${tail}`));
    }
    return text;
  };
}
