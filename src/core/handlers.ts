/**
 * The RPC → domain table: one complete, typed implementation per generated
 * service, merged from the domain services that implement its methods (each
 * declares which, as a Pick of the service's ServiceImpl). A method the proto
 * adds and no domain service implements is a compile error here, and the core
 * refuses to start without it.
 */
import { AdminServiceService } from '../gen/botplatform/v1/admin_service.js';
import { ConsoleServiceService } from '../gen/botplatform/v1/console_service.js';
import { InternalServiceService } from '../gen/botplatform/v1/internal_service.js';
import { RuntimeServiceService } from '../gen/botplatform/v1/runtime_service.js';
import type { AdminService } from '../domain/admin-service.js';
import type { ChatMessagesService } from '../domain/chat-messages-service.js';
import type { ConsoleService } from '../domain/console-service.js';
import type { RuntimeService } from '../domain/runtime-service.js';
import type { UpdatesService } from '../domain/updates-service.js';
import type { DeliveriesService } from '../domain/deliveries-service.js';
import type { FeedService } from '../domain/feed-service.js';
import type { FilesService } from '../domain/files-service.js';
import type { MessagesService } from '../domain/messages-service.js';
import type { QueriesService } from '../domain/queries-service.js';
import type { MetricsService } from '../domain/metrics-service.js';
import type { AdminRpc, ConsoleRpc, InternalRpc, RuntimeRpc } from '../domain/rpc.js';
import { bindService, type BoundMethod } from './core.js';

interface Services {
  console: ConsoleService;
  admin: AdminService;
  runtime: RuntimeService;
  updates: UpdatesService;
  deliveries: DeliveriesService;
  messages: MessagesService;
  queries: QueriesService;
  files: FilesService;
  metrics: MetricsService;
  feed: FeedService;
  chatMessages: ChatMessagesService;
}

export function createHandlers({ console, admin, runtime, updates, deliveries, messages, queries, files, metrics, feed, chatMessages }: Services): Record<string, BoundMethod> {
  const consoleRpc: ConsoleRpc = { ...console, ...updates, ...deliveries, ...metrics, ...chatMessages };
  const adminRpc: AdminRpc = admin;
  const runtimeRpc: RuntimeRpc = { ...runtime, ...updates, ...messages, ...queries, ...files };
  const internalRpc: InternalRpc = { ...updates, ...feed };
  return {
    ...bindService(ConsoleServiceService, consoleRpc),
    ...bindService(AdminServiceService, adminRpc),
    ...bindService(RuntimeServiceService, runtimeRpc),
    ...bindService(InternalServiceService, internalRpc),
  };
}
