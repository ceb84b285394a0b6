/** Shared set-up of the SDK tests: the real service (test/helpers/harness.ts) driven through the SDK's own clients. */
import type { Harness } from '../../test/helpers/harness.js';
import { createAdminClient, createBotClient, createConsoleClient, type BotClient, type ConsoleClient } from '../src/index.js';

export interface TestBot {
  id: string;
  token: string;
  bot: BotClient;
}

/** An account's console client and a helper that creates approved bots through the SDK. */
export async function sdkAccount(h: Harness, sub: string) {
  const console = createConsoleClient(await h.jwt(sub), { baseUrl: h.url });
  const admin = createAdminClient(await h.jwt(`${sub}-reviewer`, { admin: true }), { baseUrl: h.url });
  return {
    console,
    async approvedBot(username: string): Promise<TestBot> {
      const created = await console.createApplication({ name: `Bot ${username}`, username });
      await admin.approveBot({ id: created.id });
      const detail = await console.getMyBot({ id: created.id });
      if (!detail.one_time_token) throw new Error('no one_time_token after approval');
      return { id: created.id, token: detail.one_time_token, bot: createBotClient(detail.one_time_token, { baseUrl: h.url }) };
    },
  };
}

export type SdkAccount = Awaited<ReturnType<typeof sdkAccount>>;

export { until } from '../../test/helpers/until.js';

export type { ConsoleClient };
