/**
 * Reading a buf JSON image (FileDescriptorSet as JSON, with source info): the
 * messages, enums and services it declares, their comments and options.
 */

export interface FieldDescriptor {
  name: string;
  number: number;
  label?: string;
  type: string;
  typeName?: string;
  jsonName?: string;
  proto3Optional?: boolean;
  oneofIndex?: number;
  options?: Record<string, unknown>;
}

export interface MessageDescriptor {
  name: string;
  field?: FieldDescriptor[];
  nestedType?: MessageDescriptor[];
  enumType?: EnumDescriptor[];
  options?: { mapEntry?: boolean };
}

export interface EnumDescriptor {
  name: string;
  value: { name: string; number: number }[];
}

export interface MethodDescriptor {
  name: string;
  inputType: string;
  /** Set when the caller streams requests. */
  clientStreaming?: boolean;
  /** Set when the method streams responses. */
  serverStreaming?: boolean;
  outputType: string;
  options?: Record<string, unknown>;
}

export interface ServiceDescriptor {
  name: string;
  method: MethodDescriptor[];
  options?: Record<string, unknown>;
}

interface FileDescriptor {
  name: string;
  package?: string;
  messageType?: MessageDescriptor[];
  enumType?: EnumDescriptor[];
  service?: ServiceDescriptor[];
  sourceCodeInfo?: { location?: { path?: number[]; leadingComments?: string }[] };
}

export interface Image {
  file: FileDescriptor[];
}

export interface Indexed<T> {
  fullName: string;
  desc: T;
  comment: string;
  /** Comments of fields (messages), values (enums) or methods (services), by index. */
  children: string[];
}

const clean = (c: string | undefined) => (c ?? '').trim().replace(/\n /g, '\n').replace(/\s+/g, ' ');

/** Everything declared in the image, by fully-qualified name (no leading dot). */
export function indexImage(image: Image) {
  const messages = new Map<string, Indexed<MessageDescriptor>>();
  const enums = new Map<string, Indexed<EnumDescriptor>>();
  const services: (Indexed<ServiceDescriptor> & { file: string })[] = [];

  for (const file of image.file) {
    const comments = new Map<string, string>();
    for (const loc of file.sourceCodeInfo?.location ?? []) {
      if (loc.leadingComments) comments.set((loc.path ?? []).join('.'), clean(loc.leadingComments));
    }
    const pkg = file.package ? `${file.package}.` : '';
    const walkEnum = (e: EnumDescriptor, prefix: string, path: string) => {
      enums.set(prefix + e.name, {
        fullName: prefix + e.name,
        desc: e,
        comment: comments.get(path) ?? '',
        children: e.value.map((_, i) => comments.get(`${path}.2.${i}`) ?? ''),
      });
    };
    const walkMessage = (m: MessageDescriptor, prefix: string, path: string) => {
      const fullName = prefix + m.name;
      messages.set(fullName, {
        fullName,
        desc: m,
        comment: comments.get(path) ?? '',
        children: (m.field ?? []).map((_, i) => comments.get(`${path}.2.${i}`) ?? ''),
      });
      (m.nestedType ?? []).forEach((n, i) => walkMessage(n, `${fullName}.`, `${path}.3.${i}`));
      (m.enumType ?? []).forEach((e, i) => walkEnum(e, `${fullName}.`, `${path}.4.${i}`));
    };
    (file.messageType ?? []).forEach((m, i) => walkMessage(m, pkg, `4.${i}`));
    (file.enumType ?? []).forEach((e, i) => walkEnum(e, pkg, `5.${i}`));
    (file.service ?? []).forEach((s, i) =>
      services.push({
        fullName: pkg + s.name,
        desc: s,
        file: file.name,
        comment: comments.get(`6.${i}`) ?? '',
        children: s.method.map((_, j) => comments.get(`6.${i}.2.${j}`) ?? ''),
      }),
    );
  }
  return { messages, enums, services };
}

export type ImageIndex = ReturnType<typeof indexImage>;
