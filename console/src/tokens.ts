/**
 * Bot tokens the API handed to this page (a bot's first read after approval, or a
 * regeneration), kept in memory only (never in storage), by bot id, until the developer
 * says they saved it. The API gives a token once: one not yet revealed survives moving
 * around the console (the bot's page shows it again); a reload or a closed tab would lose
 * it, so while one waits the browser asks before leaving, and signing out asks first.
 */
export type Token = { token: string; telegram?: string };
type Held = Token & { revealed: boolean };

const held = new Map<string, Held>();

export const tokens = {
  get(botId: string): Held | undefined {
    return held.get(botId);
  },
  /** A token the API handed over, not yet revealed (revealed: a regeneration, shown on the click that asked for it). */
  hold(botId: string, token: Token, revealed = false) {
    held.set(botId, { ...token, revealed });
  },
  reveal(botId: string) {
    const t = held.get(botId);
    if (t) t.revealed = true;
  },
  /** The developer saved it: gone from memory. */
  forget(botId: string) {
    held.delete(botId);
  },
  /** How many tokens wait to be revealed. */
  unrevealed(): number {
    let n = 0;
    for (const t of held.values()) if (!t.revealed) n++;
    return n;
  },
  clear() {
    held.clear();
  },
};

// Leaving (reload, closed tab, another site) while a token waits: the browser asks first.
addEventListener('beforeunload', (e) => {
  if (tokens.unrevealed() === 0) return;
  e.preventDefault();
  // Chromium before 119 and others ask only when returnValue is set.
  e.returnValue = '';
});
