/**
 * The gateway generator. Reads the buf JSON image of proto/ and writes:
 *   gateway/generated/routes.ts  – the Fastify route table and the JSON schemas of every routed message
 *   gateway/generated/openapi.json – an OpenAPI 3.1 document of the same routes
 *   src/gen/methods.ts           – each RPC's credential, surface and per-chat limit, for the core's auth and limits interceptors
 *   src/gen/constraints.ts       – every field's (botplatform.v1.constraints), for the domain validation
 *   sdk/src/generated/api.ts     – the SDK's wire types and method bindings
 * Usage: tsx gateway/generator/main.ts <image.json> <repo root>
 */
import fs from 'node:fs';
import path from 'node:path';
import { indexImage, type FieldDescriptor, type Image, type ImageIndex } from './descriptors.js';
import type { EnumSchema, FieldSchema, FieldType, HttpMethod, MessageSchema, RouteSpec, Surface } from '../runtime/schema.js';
import { buildOpenApi, type FieldOptions } from './openapi.js';
import { buildSdk } from './sdk.js';
import { buildConstraints } from './constraints.js';

const SETTINGS_OPTION = '[botplatform.v1.service_settings]';
const SUCCESS_OPTION = '[botplatform.v1.http_success_code]';
const HTTP_OPTION = '[google.api.http]';
const NULL_WHEN_UNSET_OPTION = '[botplatform.v1.null_when_unset]';
const CHAT_LIMITED_OPTION = '[botplatform.v1.chat_limited]';
const CONSTRAINTS_OPTION = '[botplatform.v1.constraints]';
const FIELD_BEHAVIOR_OPTION = '[google.api.field_behavior]';
const INTEGER_TYPES = ['TYPE_INT64', 'TYPE_SINT64', 'TYPE_SFIXED64', 'TYPE_INT32', 'TYPE_SINT32', 'TYPE_SFIXED32'];

const SCALARS: Record<string, FieldType> = {
  TYPE_STRING: { kind: 'scalar', scalar: 'string' },
  TYPE_BOOL: { kind: 'scalar', scalar: 'bool' },
  TYPE_INT32: { kind: 'scalar', scalar: 'int32' },
  TYPE_SINT32: { kind: 'scalar', scalar: 'int32' },
  TYPE_SFIXED32: { kind: 'scalar', scalar: 'int32' },
  TYPE_UINT32: { kind: 'scalar', scalar: 'uint32' },
  TYPE_FIXED32: { kind: 'scalar', scalar: 'uint32' },
  TYPE_INT64: { kind: 'scalar', scalar: 'int64' },
  TYPE_SINT64: { kind: 'scalar', scalar: 'int64' },
  TYPE_SFIXED64: { kind: 'scalar', scalar: 'int64' },
  TYPE_UINT64: { kind: 'scalar', scalar: 'uint64' },
  TYPE_FIXED64: { kind: 'scalar', scalar: 'uint64' },
  TYPE_DOUBLE: { kind: 'scalar', scalar: 'double' },
  TYPE_FLOAT: { kind: 'scalar', scalar: 'double' },
  TYPE_BYTES: { kind: 'scalar', scalar: 'bytes' },
};

/** ts-proto's property naming (case.ts snakeToCamel). */
function tsName(protoName: string): string {
  if (!protoName.includes('_')) return protoName;
  const hasLower = /[a-z]/.test(protoName);
  return protoName
    .split('_')
    .map((w, i) => {
      const word = hasLower ? w : w.toLowerCase();
      return i === 0 ? word : word.charAt(0).toUpperCase() + word.slice(1);
    })
    .join('');
}

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
const strip = (typeName: string) => typeName.replace(/^\./, '');

function fieldType(f: FieldDescriptor, index: ImageIndex, where: string): FieldType {
  if (f.type === 'TYPE_ENUM') return { kind: 'enum', ref: strip(f.typeName!) };
  if (f.type === 'TYPE_MESSAGE') {
    const ref = strip(f.typeName!);
    if (ref === 'google.protobuf.Timestamp') return { kind: 'timestamp' };
    if (ref === 'google.protobuf.FieldMask') return { kind: 'fieldmask' };
    const entry = index.messages.get(ref)?.desc;
    if (entry?.options?.mapEntry) {
      const [k, v] = entry.field!;
      const key = fieldType(k!, index, `${where}.key`);
      if (key.kind !== 'scalar') throw new Error(`${where}: map keys must be scalars`);
      return { kind: 'map', key: key.scalar, value: fieldType(v!, index, `${where}.value`) };
    }
    return { kind: 'message', ref };
  }
  const t = SCALARS[f.type];
  if (!t) throw new Error(`${where}: unsupported field type ${f.type}`);
  return t;
}

interface HttpRule {
  get?: string; post?: string; put?: string; patch?: string; delete?: string;
  body?: string;
  responseBody?: string;
  additionalBindings?: HttpRule[];
}

function parseTemplate(template: string, where: string) {
  const pathParams: RouteSpec['pathParams'] = [];
  const fastifyPath = template.replace(/\{([a-z0-9_.]+)(=\*)?\}/g, (_, field: string) => {
    const param = field.replace(/\./g, '__');
    pathParams.push({ param, field: field.split('.') });
    return `:${param}`;
  });
  if (/[{}*]/.test(fastifyPath)) throw new Error(`${where}: unsupported path template ${template}`);
  return { fastifyPath, pathParams };
}

function main() {
  const [imagePath, root] = process.argv.slice(2);
  if (!imagePath || !root) throw new Error('usage: main.ts <image.json> <repo root>');
  const image = JSON.parse(fs.readFileSync(imagePath, 'utf8')) as Image;
  const index = indexImage(image);

  const routes: (Omit<RouteSpec, 'grpc'> & { grpcRef: string; importFrom: string; serviceConst: string })[] = [];
  const methods: Record<string, { credential: string; surface: string; chatLimited: boolean; streaming?: string }> = {};
  const messages: Record<string, MessageSchema> = {};
  const enums: Record<string, EnumSchema> = {};
  const comments: Record<string, string> = {};
  /** "Message.field" → its field_behavior and (botplatform.v1.constraints), for the OpenAPI document. */
  const fieldOptions: Record<string, FieldOptions> = {};

  const addEnum = (ref: string) => {
    if (enums[ref]) return;
    const e = index.enums.get(ref);
    if (!e) throw new Error(`unknown enum ${ref}`);
    const names = e.desc.value.map((v) => v.name);
    const prefix = names.find((n) => n.endsWith('_UNSPECIFIED'))?.replace(/UNSPECIFIED$/, '') ?? '';
    enums[ref] = { prefix, values: Object.fromEntries(e.desc.value.map((v) => [v.name, v.number])) };
  };
  const addMessage = (ref: string) => {
    if (messages[ref]) return;
    const m = index.messages.get(ref);
    if (!m) throw new Error(`unknown message ${ref}`);
    messages[ref] = { fields: [] };
    comments[ref] = m.comment;
    messages[ref] = {
      fields: (m.desc.field ?? []).map((f, i): FieldSchema => {
        const type = fieldType(f, index, `${ref}.${f.name}`);
        if (f.oneofIndex !== undefined && !f.proto3Optional) throw new Error(`${ref}.${f.name}: oneof is not supported yet`);
        comments[`${ref}.${f.name}`] = m.children[i] ?? '';
        const behavior = f.options?.[FIELD_BEHAVIOR_OPTION] as string[] | undefined;
        const constraints = f.options?.[CONSTRAINTS_OPTION] as FieldOptions['constraints'];
        if (behavior || constraints) fieldOptions[`${ref}.${f.name}`] = { behavior: behavior ?? [], constraints };
        const element = type.kind === 'map' ? type.value : type;
        if (element.kind === 'message') addMessage(element.ref);
        if (element.kind === 'enum') addEnum(element.ref);
        return {
          proto: f.name,
          json: f.jsonName ?? tsName(f.name),
          ts: tsName(f.name),
          type,
          // A map is a repeated entry message in the descriptor, one JSON object on the wire.
          repeated: f.label === 'LABEL_REPEATED' && type.kind !== 'map',
          optional: Boolean(f.proto3Optional),
          ...(f.options?.[NULL_WHEN_UNSET_OPTION] === true ? { nullWhenUnset: true } : {}),
          ...(behavior?.includes('REQUIRED') ? { required: true } : {}),
          ...(constraints?.minItems !== undefined
            ? { minItems: { count: constraints.minItems, ...(constraints.allowedValues?.length ? { values: constraints.allowedValues } : {}) } }
            : {}),
        };
      }),
    };
  };

  // Our services only: vendored ones (grpc.health.v1) are served by their own implementations.
  for (const svc of index.services.filter((s) => s.fullName.startsWith('botplatform.'))) {
    const settings = svc.desc.options?.[SETTINGS_OPTION] as { surface?: string; credential?: string } | undefined;
    if (!settings?.surface || !settings.credential) throw new Error(`${svc.fullName}: missing (botplatform.v1.service_settings)`);
    const surface = settings.surface.replace('API_SURFACE_', '').toLowerCase();
    const credential = settings.credential.replace('CREDENTIAL_', '').toLowerCase();
    const serviceName = svc.fullName.split('.').pop()!;
    const importFrom = svc.file.replace(/\.proto$/, '.js');
    svc.desc.method.forEach((m, j) => {
      const rpc = `${svc.fullName}/${m.name}`;
      const chatLimited = m.options?.[CHAT_LIMITED_OPTION] === true;
      if (chatLimited) {
        if (credential !== 'bot_token') throw new Error(`${rpc}: chat_limited applies to methods called with a bot token only`);
        const chatId = index.messages.get(strip(m.inputType))?.desc.field?.find((f) => f.name === 'chat_id');
        if (!chatId || !INTEGER_TYPES.includes(chatId.type) || chatId.label === 'LABEL_REPEATED') {
          throw new Error(`${rpc}: chat_limited needs an integer chat_id field in ${strip(m.inputType)}`);
        }
      }
      // Streaming methods say which side streams; the core binds them to streaming handlers.
      const streaming = m.clientStreaming && m.serverStreaming ? 'bidi' : m.clientStreaming ? 'client' : m.serverStreaming ? 'server' : undefined;
      methods[`/${rpc}`] = { credential, surface, chatLimited, ...(streaming ? { streaming } : {}) };
      const rule = m.options?.[HTTP_OPTION] as HttpRule | undefined;
      // No HTTP rule: gRPC only, left out of routes, OpenAPI and SDK.
      if (!rule) return;
      if (surface === 'internal') throw new Error(`${rpc}: internal services have no HTTP binding`);
      if (streaming) throw new Error(`${rpc}: a streaming method cannot have an HTTP binding`);
      comments[rpc] = svc.children[j] ?? '';
      const requestType = strip(m.inputType);
      const responseType = strip(m.outputType);
      addMessage(requestType);
      addMessage(responseType);
      for (const binding of [rule, ...(rule.additionalBindings ?? [])]) {
        const verb = (['get', 'post', 'put', 'patch', 'delete'] as const).find((v) => binding[v]);
        if (!verb) throw new Error(`${rpc}: http rule without a method`);
        const template = binding[verb]!;
        const { fastifyPath, pathParams } = parseTemplate(template, rpc);
        const body = binding.body || null;
        if (body && body !== '*' && !messages[requestType]!.fields.some((f) => f.proto === body)) {
          throw new Error(`${rpc}: body field ${body} is not in ${requestType}`);
        }
        const responseBody = binding.responseBody || null;
        routes.push({
          rpc,
          method: verb.toUpperCase() as HttpMethod,
          template,
          fastifyPath,
          pathParams,
          body,
          responseBody,
          successCode: Number(m.options?.[SUCCESS_OPTION] ?? 200),
          surface: surface as Surface,
          requestType,
          responseType,
          grpcRef: `${serviceName}Service.${lowerFirst(m.name)}`,
          importFrom,
          serviceConst: `${serviceName}Service`,
        });
      }
    });
  }

  const imports = new Map<string, Set<string>>();
  for (const r of routes) {
    if (!imports.has(r.importFrom)) imports.set(r.importFrom, new Set());
    imports.get(r.importFrom)!.add(r.serviceConst);
  }
  const header = '// Code generated by gateway/generator from proto/. DO NOT EDIT.\n';
  const routeLines = routes.map(({ grpcRef, importFrom: _i, serviceConst: _s, ...r }) =>
    `  ${JSON.stringify(r).slice(0, -1)}, "grpc": ${grpcRef} },`,
  );
  const routesTs =
    header +
    "import type { RouteTable } from '../runtime/schema.js';\n" +
    [...imports]
      .sort()
      .map(([file, names]) => `import { ${[...names].sort().join(', ')} } from '../../src/gen/${file}';\n`)
      .join('') +
    '\nexport const routeTable: RouteTable = {\n  routes: [\n' +
    routeLines.join('\n') +
    `\n  ],\n  messages: ${JSON.stringify(messages, null, 2).replace(/\n/g, '\n  ')},\n` +
    `  enums: ${JSON.stringify(enums, null, 2).replace(/\n/g, '\n  ')},\n};\n`;
  fs.mkdirSync(path.join(root, 'gateway/generated'), { recursive: true });
  fs.writeFileSync(path.join(root, 'gateway/generated/routes.ts'), routesTs);

  const methodsTs =
    header.replace('gateway/generator', 'gateway/generator (methods)') +
    '/**\n * Credential and surface of every RPC, from (botplatform.v1.service_settings), and whether it\n' +
    ' * counts against the per-chat send limit, from (botplatform.v1.chat_limited), and which side of it\n' +
    ' * streams, if any.\n */\n' +
    "export type Credential = 'account_jwt' | 'admin_jwt' | 'bot_token' | 'internal';\n" +
    "export interface MethodSettings {\n" +
    '  credential: Credential;\n' +
    "  surface: 'console' | 'runtime' | 'internal';\n" +
    '  chatLimited: boolean;\n' +
    '  /** Which side streams; absent for a unary method. */\n' +
    "  streaming?: 'client' | 'server' | 'bidi';\n" +
    '}\n' +
    `const settings = ${JSON.stringify(methods, null, 2)} as const satisfies Record<string, MethodSettings>;\n` +
    '/** The path of every RPC ("/botplatform.v1.RuntimeService/GetMe"). */\n' +
    'export type RpcPath = keyof typeof settings;\n' +
    "/** One RPC's settings as literal types: its credential decides the principal its handler is given. */\n" +
    'export type SettingsOf<P extends RpcPath> = (typeof settings)[P];\n' +
    'export const methodSettings: Readonly<Record<string, MethodSettings>> = settings;\n';
  fs.writeFileSync(path.join(root, 'src/gen/methods.ts'), methodsTs);
  fs.writeFileSync(path.join(root, 'src/gen/constraints.ts'), buildConstraints(index, CONSTRAINTS_OPTION));

  const openapi = buildOpenApi({ routes, messages, enums, comments, fieldOptions, credentials: Object.fromEntries(Object.entries(methods).map(([k, v]) => [k.slice(1), v.credential])) });
  fs.writeFileSync(path.join(root, 'gateway/generated/openapi.json'), JSON.stringify(openapi, null, 2) + '\n');

  fs.mkdirSync(path.join(root, 'sdk/src/generated'), { recursive: true });
  fs.writeFileSync(path.join(root, 'sdk/src/generated/api.ts'), buildSdk({ routes, messages, enums, comments, index }));
}

main();
