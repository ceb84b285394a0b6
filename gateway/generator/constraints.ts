/**
 * src/gen/constraints.ts: the (botplatform.v1.constraints) of every field of every
 * message in the image (routed or not), as a typed table the domain validation
 * reads its limits from. A constraint that does not fit its field (a length on a
 * number, max_items on a single value, a pattern that is not an ECMAScript
 * regular expression, a bound beyond what a JavaScript number holds exactly, values on
 * a field that is not a string, a conflict with a field the message does not have) stops
 * the generator.
 */
import type { ImageIndex } from './descriptors.js';

/** (botplatform.v1.constraints) as buf's JSON image spells it (int64 bounds are strings). */
export interface ImageConstraints {
  minLength?: number; maxLength?: number; pattern?: string;
  minimum?: string | number; maximum?: string | number;
  maxItems?: number;
  minItems?: number;
  allowedValues?: string[];
  conflictsWith?: string;
  maximumSetting?: string;
  nonZero?: boolean;
  parsedMaxLength?: number;
}

const NUMBER_TYPES = new Set([
  'TYPE_INT32', 'TYPE_SINT32', 'TYPE_SFIXED32', 'TYPE_UINT32', 'TYPE_FIXED32',
  'TYPE_INT64', 'TYPE_SINT64', 'TYPE_SFIXED64', 'TYPE_UINT64', 'TYPE_FIXED64', 'TYPE_DOUBLE', 'TYPE_FLOAT',
]);

export function buildConstraints(index: ImageIndex, option: string): string {
  const table: Record<string, Record<string, string>> = {};
  for (const name of [...index.messages.keys()].sort()) {
    const m = index.messages.get(name)!;
    for (const f of m.desc.field ?? []) {
      const c = f.options?.[option] as ImageConstraints | undefined;
      if (!c) continue;
      const where = `${name}.${f.name}`;
      const repeated = f.label === 'LABEL_REPEATED';
      const isString = f.type === 'TYPE_STRING';
      const isNumber = NUMBER_TYPES.has(f.type);
      const entries: string[] = [];
      const bound = (key: string, v: number | undefined) => {
        if (v === undefined) return;
        if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${where}: ${key} must be a non-negative integer`);
        entries.push(`${key}: ${v}`);
      };
      if (c.minLength !== undefined || c.maxLength !== undefined || c.pattern) {
        if (!isString) throw new Error(`${where}: lengths and patterns apply to string fields`);
      }
      bound('minLength', c.minLength);
      bound('maxLength', c.maxLength);
      if (c.minLength !== undefined && c.maxLength !== undefined && c.minLength > c.maxLength) throw new Error(`${where}: min_length > max_length`);
      if (c.parsedMaxLength !== undefined) {
        // The raw input's max_length bounds what is parsed: it must be given, and leave room for markup.
        if (!isString || c.maxLength === undefined) throw new Error(`${where}: parsed_max_length applies to a string field with a max_length`);
        if (c.parsedMaxLength > c.maxLength) throw new Error(`${where}: parsed_max_length > max_length`);
        bound('parsedMaxLength', c.parsedMaxLength);
      }
      if (c.pattern) {
        try {
          new RegExp(c.pattern, 'u');
        } catch (err) {
          throw new Error(`${where}: pattern is not an ECMAScript regular expression: ${(err as Error).message}`);
        }
        if (!c.pattern.startsWith('^') || !c.pattern.endsWith('$')) throw new Error(`${where}: a pattern must be anchored (^...$)`);
        entries.push(`pattern: new RegExp(${JSON.stringify(c.pattern)}, 'u')`);
      }
      for (const key of ['minimum', 'maximum'] as const) {
        if (c[key] === undefined) continue;
        if (!isNumber) throw new Error(`${where}: ${key} applies to number fields`);
        const v = Number(c[key]);
        if (!Number.isSafeInteger(v)) throw new Error(`${where}: ${key} must be within +-(2^53-1)`);
        entries.push(`${key}: ${v}`);
      }
      if (c.minimum !== undefined && c.maximum !== undefined && Number(c.minimum) > Number(c.maximum)) throw new Error(`${where}: minimum > maximum`);
      if (c.maxItems !== undefined) {
        if (!repeated) throw new Error(`${where}: max_items applies to repeated fields`);
        bound('maxItems', c.maxItems);
      }
      if (c.minItems !== undefined) {
        if (!repeated) throw new Error(`${where}: min_items applies to repeated fields`);
        if (c.minItems < 1) throw new Error(`${where}: min_items must be at least 1`);
        if (c.maxItems !== undefined && c.minItems > c.maxItems) throw new Error(`${where}: min_items > max_items`);
        bound('minItems', c.minItems);
      }
      if (c.allowedValues?.length) {
        if (f.type === 'TYPE_ENUM') {
          // A subset of the enum's values, by their wire names ("dead_letter" for DELIVERY_STATUS_DEAD_LETTER).
          const e = index.enums.get(f.typeName!.replace(/^\./, ''));
          const names = (e?.desc.value ?? []).map((v) => v.name);
          const prefix = names.find((n) => n.endsWith('_UNSPECIFIED'))?.replace(/UNSPECIFIED$/, '') ?? '';
          const wire = new Set(names.filter((n) => !n.endsWith('_UNSPECIFIED')).map((n) => n.slice(prefix.length).toLowerCase()));
          const unknown = c.allowedValues.filter((v) => !wire.has(v));
          if (unknown.length) throw new Error(`${where}: allowed_values names no value of the enum: ${unknown.join(', ')}`);
        } else if (!isString) throw new Error(`${where}: allowed_values applies to string and enum fields`);
        if (new Set(c.allowedValues).size !== c.allowedValues.length) throw new Error(`${where}: allowed_values repeats a value`);
        entries.push(`allowedValues: ${JSON.stringify(c.allowedValues)}`);
      }
      if (c.maximumSetting) {
        if (!isNumber) throw new Error(`${where}: maximum_setting applies to number fields`);
        if (!/^[A-Z][A-Z0-9_]*$/.test(c.maximumSetting)) throw new Error(`${where}: maximum_setting names a setting (UPPER_SNAKE_CASE)`);
        entries.push(`maximumSetting: ${JSON.stringify(c.maximumSetting)}`);
      }
      if (c.nonZero) {
        if (!isNumber) throw new Error(`${where}: non_zero applies to number fields`);
        entries.push('nonZero: true');
      }
      if (c.conflictsWith) {
        const other = (m.desc.field ?? []).find((o) => o.name === c.conflictsWith);
        if (!other || other.name === f.name) throw new Error(`${where}: conflicts_with names no other field of ${name}`);
        entries.push(`conflictsWith: ${JSON.stringify(c.conflictsWith)}`);
      }
      if (entries.length === 0) throw new Error(`${where}: empty (botplatform.v1.constraints)`);
      (table[name] ??= {})[f.name] = `{ ${entries.join(', ')} }`;
    }
  }
  const body = Object.entries(table)
    .map(([message, fields]) =>
      `  ${JSON.stringify(message)}: {\n` +
      Object.entries(fields).map(([field, c]) => `    ${JSON.stringify(field)}: ${c},\n`).join('') +
      '  },\n')
    .join('');
  return (
    '// Code generated by gateway/generator (constraints) from proto/. DO NOT EDIT.\n' +
    '/**\n' +
    ' * The (botplatform.v1.constraints) of every field that declares them, by full message\n' +
    ' * name and proto field name: the one source of the limits the domain validation\n' +
    ' * enforces and the OpenAPI document publishes. Lengths count Unicode code points;\n' +
    ' * a pattern is an anchored ECMAScript regular expression (flag u) the whole value matches.\n' +
    ' */\n' +
    'export interface FieldConstraints {\n' +
    '  readonly minLength?: number;\n' +
    '  readonly maxLength?: number;\n' +
    '  readonly pattern?: RegExp;\n' +
    '  readonly minimum?: number;\n' +
    '  readonly maximum?: number;\n' +
    '  readonly maxItems?: number;\n' +
    '  /** Fewest entries when the list is given: the HTTP gateway refuses a shorter one (gRPC cannot tell an empty list from none). */\n' +
    '  readonly minItems?: number;\n' +
    '  /** The only values of the field (of each entry, when repeated). */\n' +
    '  readonly allowedValues?: readonly string[];\n' +
    '  /** Another field (proto name) of the message that may not be given with this one. */\n' +
    '  readonly conflictsWith?: string;\n' +
    '  /** The setting that bounds the value from above in this deployment (the served OpenAPI document carries its value). */\n' +
    '  readonly maximumSetting?: string;\n' +
    '  /** The number may not be 0. */\n' +
    '  readonly nonZero?: boolean;\n' +
    '  /** Most UTF-16 code units once parsed (a message text or caption; maxLength then bounds the raw input, markup included). */\n' +
    '  readonly parsedMaxLength?: number;\n' +
    '}\n\n' +
    `const table = {\n${body}} as const satisfies Record<string, Record<string, FieldConstraints>>;\n\n` +
    '/** Every message with a constrained field. */\n' +
    'export type ConstrainedMessage = keyof typeof table;\n' +
    '/** The constrained fields of a message (proto names). */\n' +
    'export type ConstrainedField<M extends ConstrainedMessage> = keyof (typeof table)[M] & string;\n' +
    '/** One field\'s constraints, with literal types: reading a limit the proto does not declare is a compile error. */\n' +
    'export type ConstraintsOf<M extends ConstrainedMessage, F extends ConstrainedField<M>> = (typeof table)[M][F];\n\n' +
    '/**\n' +
    ' * The constraints of one field, e.g. constraintsOf(\'botplatform.v1.SendMessageRequest\', \'text\').maxLength.\n' +
    ' * A field without constraints does not compile (and throws if reached without types).\n' +
    ' */\n' +
    'export function constraintsOf<M extends ConstrainedMessage, F extends ConstrainedField<M>>(message: M, field: F): ConstraintsOf<M, F> {\n' +
    '  const c = (table as Record<string, Record<string, FieldConstraints> | undefined>)[message]?.[field];\n' +
    '  if (!c) throw new Error(`${message}.${field} has no (botplatform.v1.constraints)`);\n' +
    '  return c as ConstraintsOf<M, F>;\n' +
    '}\n\n' +
    '/** The whole table, message → field → constraints. */\n' +
    'export const constraintTable: Readonly<Record<string, Readonly<Record<string, FieldConstraints>>>> = table;\n'
  );
}
