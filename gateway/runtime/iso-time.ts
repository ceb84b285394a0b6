/**
 * A time's RFC 3339 text as `Date.prototype.toISOString` writes it ("2026-11-28T21:34:05.123Z"),
 * about five times faster: V8's own takes 1.2-1.4 µs a call on this machine, and every
 * console read writes two a bot (created_at, updated_at; GET /bots/my with 6 bots, 12).
 * Days to a civil date by Howard Hinnant's algorithm (days_from_civil's inverse, proleptic
 * Gregorian, as ECMAScript's); years outside 0-9999 (written with a sign and six digits)
 * and invalid dates (a RangeError) are left to toISOString.
 */
const DAY_MS = 86_400_000;
const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/** The earliest and the latest time with a four-digit year: 0000-01-01 and the end of 9999. */
const FIRST_MS = -62_167_219_200_000;
const END_MS = 253_402_300_800_000;

export function isoTime(date: Date): string {
  const ms = date.getTime();
  if (!(ms >= FIRST_MS && ms < END_MS)) return date.toISOString();
  const days = Math.floor(ms / DAY_MS);
  let rest = ms - days * DAY_MS;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365);
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const yyyy = year < 10 ? `000${year}` : year < 100 ? `00${year}` : year < 1000 ? `0${year}` : `${year}`;
  return `${yyyy}-${two(month)}-${two(day)}T${two(hours)}:${two(minutes)}:${two(seconds)}.${three(rest - seconds * 1000)}Z`;
}
