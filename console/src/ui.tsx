import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiFailure, type Pagination } from './api';

export function Alert({ kind = 'error', children }: { kind?: 'error' | 'warn' | 'ok' | 'info'; children: ComponentChildren }) {
  return <div class={`alert ${kind}`} role={kind === 'error' ? 'alert' : 'status'}>{children}</div>;
}

/** An API failure as a page-level message (field errors are shown beside their fields). */
export function ErrorAlert({ error, fields = [] }: { error?: unknown; fields?: string[] }) {
  if (!error) return null;
  if (error instanceof ApiFailure) {
    const shownInline = error.details.length > 0 && error.details.every((d) => fields.some((f) => fieldMatches(d.field, f)));
    return (
      <Alert>
        {shownInline ? 'Please correct the fields marked below.' : error.message}
        {!shownInline && error.status && error.http ? <span class="muted"> ({error.status})</span> : null}
      </Alert>
    );
  }
  return <Alert>{String(error)}</Alert>;
}

const fieldMatches = (detail: string, field: string) =>
  detail === field || detail === `bot.${field}` || detail.startsWith(`${field}[`) || detail.startsWith(`${field}.`) ||
  detail.startsWith(`bot.${field}[`) || detail.startsWith(`bot.${field}.`);

/** The API's messages for a field and the fields under it ("links[0].url"). */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiFailure)) return undefined;
  const hits = error.details.filter((d) => fieldMatches(d.field, field));
  if (hits.length === 0) return undefined;
  return hits.map((d) => {
    const text = error.fieldMessage(d.field) ?? d.reason;
    const sub = d.field.replace(/^bot\./, '');
    return sub === field ? text : `${sub}: ${text}`;
  }).join('; ');
}

export function Field(props: {
  id: string;
  label: string;
  value: string;
  onInput: (v: string) => void;
  error?: string;
  hint?: string;
  type?: string;
  multiline?: boolean;
  required?: boolean;
  placeholder?: string;
}) {
  const describedBy = [props.hint && `${props.id}-hint`, props.error && `${props.id}-error`].filter(Boolean).join(' ') || undefined;
  const common = {
    id: props.id,
    name: props.id,
    value: props.value,
    required: props.required,
    placeholder: props.placeholder,
    'aria-invalid': props.error ? ('true' as const) : undefined,
    'aria-describedby': describedBy,
    onInput: (e: Event) => props.onInput((e.target as HTMLInputElement).value),
  };
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.multiline ? <textarea rows={3} {...common} /> : <input type={(props.type ?? 'text') as 'text'} autoComplete="off" {...common} />}
      {props.hint && <small id={`${props.id}-hint`} class="muted">{props.hint}</small>}
      {props.error && <p class="field-error" id={`${props.id}-error`}>{props.error}</p>}
    </div>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setDone(true);
      setTimeout(() => setDone(false), 2000);
    } catch {
      // Clipboard refused (no permission): the value is selectable on the page.
    }
  };
  return <button type="button" onClick={copy}>{done ? 'Copied' : label}</button>;
}

export function Pager({ pagination, onPage, label = 'Pages' }: { pagination?: Pagination | null; onPage: (p: number) => void; label?: string }) {
  if (!pagination) return null;
  const pages = Math.max(1, Math.ceil(pagination.total / pagination.limit));
  return (
    <nav class="pager" aria-label={label}>
      <button type="button" disabled={pagination.page <= 1} onClick={() => onPage(pagination.page - 1)}>Previous</button>
      <span>Page {pagination.page} of {pages} · {pagination.total} in all</span>
      <button type="button" disabled={!pagination.has_more} onClick={() => onPage(pagination.page + 1)}>Next</button>
    </nav>
  );
}

export function Badge({ value }: { value: string }) {
  return <span class={`badge b-${value}`}>{value.replace(/_/g, ' ')}</span>;
}

export const fmtTime = (t?: string | null) => (t ? new Date(t).toLocaleString() : '—');

export function Page({ children, narrow }: { children: ComponentChildren; narrow?: boolean }) {
  return <main id="main" tabIndex={-1} class={narrow ? 'narrow' : undefined}>{children}</main>;
}
