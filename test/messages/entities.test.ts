/**
 * Telegram message entities (src/messages/entities.ts), table-driven.
 *
 * Expected values come from tdlib (github.com/tdlib/td, commit 022d602):
 * - "tdlib test" = transcribed from test/message_entities.cpp (tdlib's own unit tests), with tdlib's
 *   internal types mapped to Bot API ones (Italic -> italic, PreCode -> pre + language,
 *   TextUrl -> text_link, MentionName -> text_mention, ...);
 * - "tdlib" = the output of tdlib's own functions (MessageEntity.cpp compiled unchanged) on that input;
 * - "Bot API docs" = examples of core.telegram.org/bots/api#formatting-options.
 * Each group names the tdlib function whose rules it checks.
 */
import { describe, expect, it } from 'vitest';
import {
  botApiErrorDescription,
  detectEntities,
  EntityParseError,
  normalizeEntities,
  parseFormatted,
  prepareMessageText,
  toHtml,
  toMarkdownV2,
  utf16Length,
  type EntityType,
  type MessageEntity,
} from '../../src/messages/entities.js';

const e = (type: EntityType, offset: number, length: number, extra: Partial<MessageEntity> = {}): MessageEntity => ({
  type,
  offset,
  length,
  ...extra,
});

function errorOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(EntityParseError);
    return (err as Error).message;
  }
  throw new Error('expected an EntityParseError');
}

type ParseCase = [input: string, text: string, entities: MessageEntity[]];
type ErrorCase = [input: string, message: string];

// ---------------------------------------------------------------------------------
// parse_html
// ---------------------------------------------------------------------------------

describe('HTML (tdlib parse_html)', () => {
  // tdlib test: every supported tag name, entity offsets in UTF-16 (➡️ is 2 code units)
  const tags: Array<[string, EntityType]> = [
    ['i', 'italic'],
    ['em', 'italic'],
    ['b', 'bold'],
    ['strong', 'bold'],
    ['u', 'underline'],
    ['ins', 'underline'],
    ['s', 'strikethrough'],
    ['strike', 'strikethrough'],
    ['del', 'strikethrough'],
    ['tg-spoiler', 'spoiler'],
    ['blockquote', 'blockquote'],
    ['code', 'code'],
    ['pre', 'pre'],
  ];
  it.each(tags)('<%s> gives %s', (tag, type) => {
    expect(parseFormatted(`➡️ ➡️<${tag}>➡️ ➡️</${tag}>`, 'HTML')).toEqual({ text: '➡️ ➡️➡️ ➡️', entities: [e(type, 5, 5)] });
  });

  const cases: ParseCase[] = [
    // tdlib test
    ['', '', []],
    ['🏟 🏟<i>🏟 &lt🏟</i>', '🏟 🏟🏟 <🏟', [e('italic', 5, 6)]],
    ['&ge;&lt;&gt;&amp;&quot;&laquo;&raquo;&#12345678;', '&ge;<>&"&laquo;&raquo;&#12345678;', []],
    ['&Or;', '&Or;', []],
    ['🏟 🏟<i>🏟 &gt;<b aba   =   caba>&lt🏟</b></i>', '🏟 🏟🏟 ><🏟', [e('italic', 5, 7), e('bold', 9, 3)]],
    ['🏟 🏟&lt;<i    aba  =  190azAz-.>a</i>', '🏟 🏟<a', [e('italic', 6, 1)]],
    ['🏟 🏟&lt;<i    aba  =  \'&lt;&gt;&quot;\'>a</>', '🏟 🏟<a', [e('italic', 6, 1)]],
    ['🏟 🏟&lt;<i>a</    >', '🏟 🏟<a', [e('italic', 6, 1)]],
    ['🏟 🏟&lt;<b></b>', '🏟 🏟<', []],
    ['<i>\n</i>', '\n', [e('italic', 0, 1)]],
    ['➡️ ➡️<span class = "tg-spoiler">➡️ ➡️</span><b>➡️ ➡️</b>', '➡️ ➡️➡️ ➡️➡️ ➡️', [e('spoiler', 5, 5), e('bold', 10, 5)]],
    ['<a href=telegram.org>\t</a>', '\t', [e('text_link', 0, 1, { url: 'http://telegram.org/' })]],
    ['<a   href=  \'telegram.org?&lt;\'   > </a>', ' ', [e('text_link', 0, 1, { url: 'http://telegram.org/?<' })]],
    ['<a> </a>', ' ', []],
    ['<a>telegram.org </a>', 'telegram.org ', []],
    ['<a>telegram.org</a>', 'telegram.org', [e('text_link', 0, 12, { url: 'http://telegram.org/' })]],
    [
      '<code><i><b> </b></i></code><i><b><code> </code></b></i>',
      '  ',
      [e('code', 0, 1), e('bold', 0, 1), e('italic', 0, 1), e('code', 1, 1), e('bold', 1, 1), e('italic', 1, 1)],
    ],
    ['🏟 🏟&lt;<pre><code>🏟 🏟&lt;</code></>', '🏟 🏟<🏟 🏟<', [e('pre', 6, 6), e('code', 6, 6)]],
    ['🏟 🏟&lt;<pre><code class="language-fift">🏟 🏟&lt;</></>', '🏟 🏟<🏟 🏟<', [e('pre', 6, 6, { language: 'fift' })]],
    ['🏟 🏟&lt;<code class="language-fift"><pre>🏟 🏟&lt;</></>', '🏟 🏟<🏟 🏟<', [e('pre', 6, 6, { language: 'fift' })]],
    ['🏟 🏟&lt;<pre> <code class="language-fift">🏟 🏟&lt;</></>', '🏟 🏟< 🏟 🏟<', [e('pre', 6, 7), e('code', 7, 6)]],
    [
      '➡️ ➡️<tg-emoji emoji-id = "12345">➡️ ➡️</tg-emoji><b>➡️ ➡️</b>',
      '➡️ ➡️➡️ ➡️➡️ ➡️',
      [e('custom_emoji', 5, 5, { customEmojiId: '12345' }), e('bold', 10, 5)],
    ],
    ['<blockquote   expandable>a&lt;<pre  >b;</></>', 'a<b;', [e('expandable_blockquote', 0, 4), e('pre', 2, 2)]],
    ['<blockquote   expandable=false>a&lt;<pre  >b;</></>', 'a<b;', [e('expandable_blockquote', 0, 4), e('pre', 2, 2)]],
    // tdlib test: <tg-time> is parsed, but date_time has no EntityType here (see the module comment)
    ['➡️ ➡️<tg-time unix = "12345", format = "r">➡️ ➡️</tg-time><b>➡️ ➡️</b>', '➡️ ➡️➡️ ➡️➡️ ➡️', [e('bold', 10, 5)]],
    // tdlib
    ['&#128512; &#x1F600;', '😀 😀', []],
    ['<a href="tg://user?id=123456">x</a>', 'x', [e('text_mention', 0, 1, { userId: 123456 })]],
    ['<B>x</B >', 'x', [e('bold', 0, 1)]],
    ['<a href="javascript:alert(1)">x</a>', 'x', []],
    ['<a href="http://a.com/x y">x</a>', 'x', [e('text_link', 0, 1, { url: 'http://a.com/x%20y' })]],
  ];
  it.each(cases)('%j', (input, text, entities) => {
    expect(parseFormatted(input, 'HTML')).toEqual({ text, entities });
  });

  // Bot API docs: the whole HTML example of "HTML style"
  it('parses the Bot API documentation example', () => {
    const html = [
      '<b>bold</b>, <strong>bold</strong>',
      '<i>italic</i>, <em>italic</em>',
      '<u>underline</u>, <ins>underline</ins>',
      '<s>strikethrough</s>, <strike>strikethrough</strike>, <del>strikethrough</del>',
      '<span class="tg-spoiler">spoiler</span>, <tg-spoiler>spoiler</tg-spoiler>',
      '<b>bold <i>italic bold <s>italic bold strikethrough <span class="tg-spoiler">italic bold strikethrough spoiler</span></s> <u>underline italic bold</u></i> bold</b>',
      '<a href="http://www.example.com/">inline URL</a>',
      '<a href="tg://user?id=123456789">inline mention of a user</a>',
      '<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>',
      '<code>inline fixed-width code</code>',
      '<pre>pre-formatted fixed-width code block</pre>',
      '<pre><code class="language-python">pre-formatted fixed-width code block written in the Python programming language</code></pre>',
      '<blockquote>Block quotation started\nBlock quotation continued\nThe last line of the block quotation</blockquote>',
      '<blockquote expandable>Expandable block quotation started\nExpandable block quotation continued\nExpandable block quotation continued\nHidden by default part of the block quotation started\nExpandable block quotation continued\nThe last line of the block quotation</blockquote>',
    ].join('\n');
    const result = parseFormatted(html, 'HTML');
    // tdlib
    expect(result.entities).toEqual([
      e('bold', 0, 4),
      e('bold', 6, 4),
      e('italic', 11, 6),
      e('italic', 19, 6),
      e('underline', 26, 9),
      e('underline', 37, 9),
      e('strikethrough', 47, 13),
      e('strikethrough', 62, 13),
      e('strikethrough', 77, 13),
      e('spoiler', 91, 7),
      e('spoiler', 100, 7),
      e('bold', 108, 103),
      e('italic', 113, 93),
      e('strikethrough', 125, 59),
      e('spoiler', 151, 33),
      e('underline', 185, 21),
      e('text_link', 212, 10, { url: 'http://www.example.com/' }),
      e('text_mention', 223, 24, { userId: 123456789 }),
      e('custom_emoji', 248, 2, { customEmojiId: '5368324170671202286' }),
      e('code', 251, 23),
      e('pre', 275, 36),
      e('pre', 312, 79, { language: 'python' }),
      e('blockquote', 392, 86),
      e('expandable_blockquote', 479, 236),
    ]);
    expect(result.text.startsWith('bold, bold\nitalic, italic\n')).toBe(true);
  });

  const errors: ErrorCase[] = [
    // tdlib test (byte offsets are UTF-8: 🏟 is 4 bytes)
    ['🏟 🏟&lt;<abacaba', 'Unclosed start tag at byte offset 13'],
    ['🏟 🏟&lt;<abac aba>', 'Unsupported start tag "abac" at byte offset 13'],
    ['🏟 🏟&lt;<i   =aba>', 'Empty attribute name in the tag "i" at byte offset 13'],
    ['🏟 🏟&lt;<i    aba>', 'Can\'t find end tag corresponding to start tag "i"'],
    ['🏟 🏟&lt;<i    aba  =  ', 'Unclosed start tag "i" at byte offset 13'],
    ['🏟 🏟&lt;<i    aba  =  190azAz-.,', 'Unexpected end of name token at byte offset 27'],
    ['🏟 🏟&lt;<i    aba  =  "&lt;&gt;&quot;>', 'Unclosed start tag at byte offset 13'],
    ['🏟 🏟&lt;</', 'Unexpected end tag at byte offset 13'],
    ['🏟 🏟&lt;<b></b></', 'Unexpected end tag at byte offset 20'],
    ['🏟 🏟&lt;<i>a</i   ', 'Unclosed end tag at byte offset 17'],
    ['🏟 🏟&lt;<i>a</em   >', 'Unmatched end tag at byte offset 17, expected "</i>", found "</em>"'],
    ['&#57311;', 'Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units'],
    ['&#xDFDF', 'Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units'],
    ['➡️ ➡️<tg-time unix = "12345", format = "rt">➡️ ➡️</tg-time>', 'Invalid date format used'],
    // tdlib
    ['<foo>', 'Unsupported start tag "foo" at byte offset 0'],
    ['a < b', 'Unsupported start tag "" at byte offset 2'],
    ['<b>x', 'Can\'t find end tag corresponding to start tag "b"'],
    ['<span>x</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'],
    ['<tg-emoji emoji-id="0">x</tg-emoji>', 'Invalid custom emoji identifier specified'],
  ];
  it.each(errors)('%j is refused', (input, message) => {
    expect(errorOf(() => parseFormatted(input, 'HTML'))).toBe(`Can't parse entities: ${message}`);
  });
});

// ---------------------------------------------------------------------------------
// parse_markdown_v2
// ---------------------------------------------------------------------------------

describe('MarkdownV2 (tdlib parse_markdown_v2)', () => {
  // tdlib test: each reserved character that cannot begin an entity is refused alone, and accepted escaped
  // ('>' alone begins a blockquote, see below)
  const reserved = Array.from(']()#+-=|{}.!');
  it.each(reserved)('reserved %s', (c) => {
    expect(errorOf(() => parseFormatted(c, 'MarkdownV2'))).toBe(
      `Can't parse entities: Character '${c}' is reserved and must be escaped with the preceding '\\'`,
    );
    expect(parseFormatted(`\\${c}`, 'MarkdownV2')).toEqual({ text: c, entities: [] });
  });

  const cases: ParseCase[] = [
    // tdlib test
    ['', '', []],
    [String.raw`\\`, '\\', []],
    [String.raw`\\\\\_\*\``, String.raw`\\_*` + '`', []],
    ['🏟 🏟_abac \\* asd _', '🏟 🏟abac * asd ', [e('italic', 5, 11)]],
    ['🏟 \\.🏟_🏟\\. 🏟_', '🏟 .🏟🏟. 🏟', [e('italic', 6, 6)]],
    ['➡️ ➡️_➡️ ➡️_*➡️ ➡️*', '➡️ ➡️➡️ ➡️➡️ ➡️', [e('italic', 5, 5), e('bold', 10, 5)]],
    ['🏟 🏟_🏟 __🏟___', '🏟 🏟🏟 🏟', [e('italic', 5, 5), e('underline', 8, 2)]],
    ['🏟 🏟__🏟 _🏟_ __', '🏟 🏟🏟 🏟 ', [e('underline', 5, 6), e('italic', 8, 2)]],
    ['🏟 🏟`🏟 🏟```', '🏟 🏟🏟 🏟', [e('code', 5, 5)]],
    ['🏟 🏟```🏟 🏟```', '🏟 🏟 🏟', [e('pre', 5, 3, { language: '🏟' })]],
    ['🏟 🏟```🏟\n🏟```', '🏟 🏟🏟', [e('pre', 5, 2, { language: '🏟' })]],
    ['🏟 🏟```🏟\n\n🏟```', '🏟 🏟\n🏟', [e('pre', 5, 3, { language: '🏟' })]],
    ['🏟 🏟**', '🏟 🏟', []],
    ['||test||', 'test', [e('spoiler', 0, 4)]],
    ['`_* *_`__*` `*__', '_* *_ ', [e('code', 0, 5), e('code', 5, 1), e('bold', 5, 1), e('underline', 5, 1)]],
    ['_* * ` `_', '   ', [e('italic', 0, 3), e('bold', 0, 1), e('code', 2, 1)]],
    ['[](telegram.org)', '', []],
    ['[ ](telegram.org)', ' ', [e('text_link', 0, 1, { url: 'http://telegram.org/' })]],
    ['[ ](as)', ' ', []],
    ['[telegram\\.org]', 'telegram.org', [e('text_link', 0, 12, { url: 'http://telegram.org/' })]],
    ['[telegram\\.org](https://telegram.dog?\\\\\\()', 'telegram.org', [e('text_link', 0, 12, { url: 'https://telegram.dog/?\\(' })]],
    ['[telegram\\.org](tg:user?id=123456)', 'telegram.org', [e('text_mention', 0, 12, { userId: 123456 })]],
    ['🏟 🏟![👍](TG://EMoJI/?test=1231&id=25#id=32)a', '🏟 🏟👍a', [e('custom_emoji', 5, 2, { customEmojiId: '25' })]],
    ['🏟 🏟![👍](TG://TiME/?test=1231&unix=25#unix=32)a', '🏟 🏟👍a', []], // date_time: no EntityType
    ['> \n> \n>', ' \n \n', [e('blockquote', 0, 4)]],
    ['abc\n> \n> \n>\ndef', 'abc\n \n \n\ndef', [e('blockquote', 4, 5)]],
    ['>', '', []],
    ['>*b\n>ld \n>bo\n>ld*\nasd\ndef', 'b\nld \nbo\nld\nasd\ndef', [e('blockquote', 0, 12), e('bold', 0, 11)]],
    ['`>b\n>ld \n>bo\nld`\n>asd\ndef', '>b\n>ld \n>bo\nld\nasd\ndef', [e('code', 0, 14), e('blockquote', 15, 4)]],
    ['>\n**>2', '\n2', [e('blockquote', 0, 1), e('blockquote', 1, 1)]],
    ['>asd\n>q||e||w||\nasdad', 'asd\nqew\nasdad', [e('expandable_blockquote', 0, 8), e('spoiler', 5, 1)]],
    ['>asd\n>q||ew||\nasdad', 'asd\nqew\nasdad', [e('blockquote', 0, 8), e('spoiler', 5, 2)]],
    [
      '>*bold _italic bold ~italic bold strikethrough ||italic bold strikethrough spoiler||~ __underline italic bold___ bold*',
      'bold italic bold italic bold strikethrough italic bold strikethrough spoiler underline italic bold bold',
      [
        e('blockquote', 0, 103),
        e('bold', 0, 103),
        e('italic', 5, 93),
        e('strikethrough', 17, 59),
        e('spoiler', 43, 33),
        e('underline', 77, 21),
      ],
    ],
    // Bot API docs examples; values from tdlib
    ['*bold \\*text*', 'bold *text', [e('bold', 0, 10)]],
    ['~a~ ||b|| __c__', 'a b c', [e('strikethrough', 0, 1), e('spoiler', 2, 1), e('underline', 4, 1)]],
    ['[x](tg://user?id=42)', 'x', [e('text_mention', 0, 1, { userId: 42 })]],
    ['![👍](tg://emoji?id=5368324170671202286)', '👍', [e('custom_emoji', 0, 2, { customEmojiId: '5368324170671202286' })]],
    ['```python\nprint(1)\n```', 'print(1)\n', [e('pre', 0, 9, { language: 'python' })]],
    ['**>abc\n>def||', 'abc\ndef', [e('expandable_blockquote', 0, 7)]],
    ['>a\nb', 'a\nb', [e('blockquote', 0, 2)]],
  ];
  it.each(cases)('%j', (input, text, entities) => {
    expect(parseFormatted(input, 'MarkdownV2')).toEqual({ text, entities });
  });

  const errors: ErrorCase[] = [
    // tdlib test
    ['🏟 🏟_abacaba', "Can't find end of Italic entity at byte offset 9"],
    ['🏟 🏟_abac * asd ', "Can't find end of Bold entity at byte offset 15"],
    ['🏟 🏟_abac * asd _', "Can't find end of Italic entity at byte offset 21"],
    ['🏟 🏟`', "Can't find end of Code entity at byte offset 9"],
    ['🏟 🏟```', "Can't find end of Pre entity at byte offset 9"],
    ['🏟 🏟```a ', "Can't find end of PreCode entity at byte offset 9"],
    ['🏟 🏟_🏟 🏟__', "Can't find end of Underline entity at byte offset 19"],
    ['🏟 🏟||test\\|', "Can't find end of Spoiler entity at byte offset 9"],
    ['[telegram\\.org](asd\\)', "Can't find end of a URL at byte offset 16"],
    ['🏟 🏟!', "Character '!' is reserved and must be escaped with the preceding '\\'"],
    ['🏟 🏟![👍', "Can't find end of CustomEmoji entity at byte offset 9"],
    ['🏟 🏟![👍]', 'The entity must contain a tg://emoji or tg://time URL'],
    ['🏟 🏟![👍](t://emoji?id=1234)', 'Invalid tg://emoji or tg://time URL specified'],
    ['🏟 🏟![👍](tg://emoji?test=1231&id=025)', 'Invalid tg://emoji or tg://time URL specified'],
    ['>*b\n>ld \n>bo\nld*\nasd\ndef', "Can't find end of Bold entity at byte offset 1"],
    ['>\n*a*>2', "Character '>' is reserved and must be escaped with the preceding '\\'"],
    ['>asd\n>q||ew\n||asdad', "Can't find end of Spoiler entity at byte offset 7"],
    // tdlib
    ['a.b', "Character '.' is reserved and must be escaped with the preceding '\\'"],
    ['_a', "Can't find end of Italic entity at byte offset 0"],
    ['a\nb > c', "Character '>' is reserved and must be escaped with the preceding '\\'"],
  ];
  it.each(errors)('%j is refused', (input, message) => {
    expect(errorOf(() => parseFormatted(input, 'MarkdownV2'))).toBe(`Can't parse entities: ${message}`);
  });
});

// ---------------------------------------------------------------------------------
// parse_markdown (legacy)
// ---------------------------------------------------------------------------------

describe('Markdown, legacy (tdlib parse_markdown)', () => {
  // values from tdlib; inputs mostly the Bot API docs' "Markdown style" examples
  const cases: ParseCase[] = [
    ['*bold* _italic_ `code`', 'bold italic code', [e('bold', 0, 4), e('italic', 5, 6), e('code', 12, 4)]],
    ['```js\nconsole.log(1)```', 'console.log(1)', [e('pre', 0, 14, { language: 'js' })]],
    ['```\ncode```', 'code', [e('pre', 0, 4)]],
    ['[text](http://www.example.com/)', 'text', [e('text_link', 0, 4, { url: 'http://www.example.com/' })]],
    ['[x](tg://user?id=42)', 'x', [e('text_mention', 0, 1, { userId: 42 })]],
    ['_snake_\\__case_', 'snake_case', [e('italic', 0, 5), e('italic', 6, 4)]],
    ['*2*\\**2=4*', '2*2=4', [e('bold', 0, 1), e('bold', 2, 3)]],
    ['**', '', []],
    ['*a_b*', 'a_b', [e('bold', 0, 3)]], // no nesting: '_' inside an entity is plain text
    // tdlib quirk: for "[text]" without "(url)" tdlib reads the URL back from its partly
    // rewritten buffer, so the link target is shifted — reproduced as the Bot API does it
    ['[telegram.org]', 'telegram.org', [e('text_link', 0, 12, { url: 'http://elegram.orgg/' })]],
  ];
  it.each(cases)('%j', (input, text, entities) => {
    expect(parseFormatted(input, 'Markdown')).toEqual({ text, entities });
  });

  const errors: ErrorCase[] = [
    ['*a', "Can't find end of the entity starting at byte offset 0"],
    ['a `b', "Can't find end of the entity starting at byte offset 2"],
    ['👍 _x', "Can't find end of the entity starting at byte offset 5"],
  ];
  it.each(errors)('%j is refused', (input, message) => {
    expect(errorOf(() => parseFormatted(input, 'Markdown'))).toBe(`Can't parse entities: ${message}`);
  });
});

// ---------------------------------------------------------------------------------
// parse_mode selection (telegram-bot-api Client::get_formatted_text)
// ---------------------------------------------------------------------------------

describe('parse_mode (Bot API Client::get_formatted_text)', () => {
  const cases: Array<[mode: string, input: string, text: string, entities: MessageEntity[]]> = [
    ['html', '<b>x</b>', 'x', [e('bold', 0, 1)]],
    ['HtMl', '<b>x</b>', 'x', [e('bold', 0, 1)]],
    ['MARKDOWNV2', '*x*', 'x', [e('bold', 0, 1)]],
    ['markdown', '*x*', 'x', [e('bold', 0, 1)]],
    ['', '<b>x</b>', '<b>x</b>', []],
    ['none', '*x*', '*x*', []],
    ['anything', '', '', []], // an empty text is never parsed, so no error either
  ];
  it.each(cases)('%j on %j', (mode, input, text, entities) => {
    expect(parseFormatted(input, mode)).toEqual({ text, entities });
  });

  it('refuses an unknown parse_mode', () => {
    expect(errorOf(() => parseFormatted('x', 'MarkdownV3'))).toBe('Unsupported parse_mode');
  });

  it('describes errors as the Bot API does (Client::fail_query_with_error)', () => {
    expect(botApiErrorDescription('Unsupported parse_mode')).toBe('Bad Request: unsupported parse_mode');
    expect(botApiErrorDescription(errorOf(() => parseFormatted('<foo>', 'HTML')))).toBe(
      'Bad Request: can\'t parse entities: Unsupported start tag "foo" at byte offset 0',
    );
    expect(botApiErrorDescription('MESSAGE_TOO_LONG')).toBe('Bad Request: MESSAGE_TOO_LONG');
  });
});

// ---------------------------------------------------------------------------------
// find_entities: find_mentions, find_bot_commands, find_hashtags, find_cashtags, find_urls
// ---------------------------------------------------------------------------------

describe('detectEntities (tdlib find_entities)', () => {
  type DetectCase = [input: string, entities: MessageEntity[]];
  const cases: DetectCase[] = [
    // find_mentions — tdlib test: 2..3-character usernames only for gif/nft/pic/ufc/vid
    ['@mention', [e('mention', 0, 8)]],
    [' @mention ', [e('mention', 1, 8)]],
    ['@abc @xyz @abc @xyz @xxx@yyy @ttt', []],
    ['@abcde @xyzxy @xxxxx@yyyyy', [e('mention', 0, 6), e('mention', 7, 6), e('mention', 14, 6)]],
    ['no@mention', []],
    ['нет@mention', []],
    ['@abcdefghijklmnopqrstuvwxyz123456', [e('mention', 0, 33)]],
    ['@abcdefghijklmnopqrstuvwxyz1234567', []],
    ['@gif @vid @pic @bold @ya @nft @ufc', [e('mention', 0, 4), e('mention', 5, 4), e('mention', 10, 4), e('mention', 15, 5), e('mention', 25, 4), e('mention', 30, 4)]],
    // find_bot_commands — tdlib test: /[a-zA-Z0-9_]{1,64}(@[a-zA-Z0-9_]{3,32})?
    ['/abc', [e('bot_command', 0, 4)]],
    [' /abc ', [e('bot_command', 1, 4)]],
    ['/a@abc', [e('bot_command', 0, 6)]],
    ['/a@b', []],
    ['/@bfdsa', [e('mention', 1, 6)]], // not a command, but a mention
    ['/test/', []],
    ['/start@jobs_bot', [e('bot_command', 0, 15)]],
    ['/start@jobs_bot/', []],
    ['a/start', []],
    ['/' + 'x'.repeat(64), [e('bot_command', 0, 65)]],
    ['/' + 'x'.repeat(65), []],
    // find_hashtags — tdlib test
    ['#a#b #c #d', [e('hashtag', 5, 2), e('hashtag', 8, 2)]],
    [' #я ', [e('hashtag', 1, 2)]],
    [' #123 ', []],
    [' #123a ', [e('hashtag', 1, 5)]],
    ['#test@', [e('hashtag', 0, 5)]],
    ['#test@ab', [e('hashtag', 0, 5)]],
    ['#test@abc', [e('hashtag', 0, 9)]],
    ['#te·st', [e('hashtag', 0, 6)]],
    ['#a\u2122', [e('hashtag', 0, 2)]],
    [' #' + '1'.repeat(255) + 'a', [e('hashtag', 1, 257)]],
    [' #' + '1'.repeat(256) + 'a ', []],
    // find_cashtags — tdlib test
    ['$USD', [e('cashtag', 0, 4)]],
    ['$ABCDEFGH', [e('cashtag', 0, 9)]],
    ['$ABCDEFGHJ', []],
    ['$abc', []],
    ['$ABC$DEF $GHI $KLM', [e('cashtag', 9, 4), e('cashtag', 14, 4)]],
    ['$TEST@abc', [e('cashtag', 0, 9)]],
    ['$1INCH', [e('cashtag', 0, 6)]],
    ['...$1INCH...', [e('cashtag', 3, 6)]],
    ['$1inch', []],
    // find_urls / fix_url / is_email_address — tdlib test
    ['telegram.org', [e('url', 0, 12)]],
    ['(telegram.org)', [e('url', 1, 12)]],
    ['.telegram.org)', []],
    [' telegram. org. www. com... telegram.org... ...google.com...', [e('url', 28, 12)]],
    ['http://telegram.org/?asd=123#123.', [e('url', 0, 32)]],
    ['telegram.Org', []],
    ['telegram.ORG', [e('url', 0, 12)]],
    ['ТеСт.МоСкВа ТеСт.Москва', [e('url', 0, 11)]],
    ['http://test.google.com/?q=abc()}[]def', [e('url', 0, 31)]],
    ['google.com:65535', [e('url', 0, 16)]],
    ['google.com:65536', [e('url', 0, 10)]],
    ['127.0.0.1', [e('url', 0, 9)]],
    ['127.0.0.256', []],
    ['teiegram.org/test', []],
    ['sftp://telegram.org', []],
    ['hTtPs://telegram.org', [e('url', 0, 20)]],
    ['https://t.me/abcdef…', [e('url', 0, 19)]],
    ['www.🤙.tk', [e('url', 0, 9)]],
    ['a.bc@c.com', [e('email', 0, 10)]],
    ['Look mailto:test@example.com', [e('email', 12, 16)]],
    ['https://a.de[bc@c.com', [e('url', 0, 12), e('email', 13, 8)]],
    ['a@b@c.com', []],
    // find_tg_urls — tdlib test
    ['tg://resolve?domain=x', [e('url', 0, 21)]],
    ['tg://test?as«df', [e('url', 0, 12)]],
    // several kinds at once, UTF-16 offsets after emoji (tdlib)
    ['👍 @durov 👍 #tag', [e('mention', 3, 6), e('hashtag', 13, 4)]],
    ['see https://example.com/a?b=c, or x.io; mail a.b@c.dev!', [e('url', 4, 25), e('url', 34, 4), e('email', 45, 9)]],
    ['/start@bot hi @durov #tag $USD', [e('bot_command', 0, 10), e('mention', 14, 6), e('hashtag', 21, 4), e('cashtag', 26, 4)]],
    // overlaps: the earlier-starting entity wins (fix_entity_offsets -> remove_intersecting_entities)
    ['http://a.com/@durov', [e('url', 0, 19)]],
    ['@durov@telegram.org', [e('mention', 0, 6)]],
    // bank card numbers are detected by tdlib but have no EntityType here; phone numbers are not detected
    ['4111111111111111', []],
    ['4111 1111 1111 1111 is my card, visit example.com', [e('url', 38, 11)]],
    ['call +1-212-555-0123 now', []],
  ];
  it.each(cases)('%j', (input, entities) => {
    expect(detectEntities(input)).toEqual(entities);
  });
});

// ---------------------------------------------------------------------------------
// get_message_entities + fix_formatted_text
// ---------------------------------------------------------------------------------

describe('normalizeEntities (tdlib get_message_entities + fix_formatted_text)', () => {
  type NormalizeCase = [text: string, input: MessageEntity[], output: MessageEntity[]];
  const cases: NormalizeCase[] = [
    // tdlib test: splittable entities are split and merged so that they nest
    ['abc', [e('italic', 1, 1), e('italic', 0, 1)], [e('italic', 0, 2)]],
    ['abc', [e('italic', 1, 1), e('italic', 1, 1)], [e('italic', 1, 1)]],
    ['abc', [e('italic', 0, 2), e('italic', 1, 2)], [e('italic', 0, 3)]],
    ['abc', [e('italic', 0, 2), e('italic', 2, 1)], [e('italic', 0, 3)]],
    ['abc', [e('italic', 0, 1), e('italic', 2, 1)], [e('italic', 0, 1), e('italic', 2, 1)]],
    ['abc', [e('italic', 0, 2), e('bold', 1, 2)], [e('italic', 0, 1), e('bold', 1, 2), e('italic', 1, 1)]],
    ['ab', [e('underline', 0, 2), e('strikethrough', 1, 1)], [e('underline', 0, 1), e('underline', 1, 1), e('strikethrough', 1, 1)]],
    ['ab', [e('underline', 0, 2), e('spoiler', 0, 1)], [e('underline', 0, 2), e('spoiler', 0, 1)]],
    // tdlib test: nothing inside pre/code; pre only inside blockquote
    ['a', [e('pre', 0, 1), e('spoiler', 0, 1)], [e('pre', 0, 1)]],
    ['abc', [e('pre', 0, 3), e('strikethrough', 1, 1)], [e('pre', 0, 3)]],
    ['abc', [e('pre', 1, 1), e('strikethrough', 0, 3)], [e('strikethrough', 0, 1), e('pre', 1, 1), e('strikethrough', 2, 1)]],
    ['abc', [e('pre', 1, 1), e('strikethrough', 1, 2)], [e('pre', 1, 1), e('strikethrough', 2, 1)]],
    ['abc', [e('pre', 0, 3), e('blockquote', 1, 1)], [e('blockquote', 1, 1)]],
    ['abc', [e('blockquote', 0, 3), e('pre', 1, 1)], [e('blockquote', 0, 3), e('pre', 1, 1)]],
    // tdlib test: '\r' is removed and entities move with the text
    ['a\rbc\r', [e('italic', 0, 1), e('bold', 0, 2), e('italic', 3, 2), e('bold', 3, 1)], [e('bold', 0, 1), e('italic', 0, 1), e('bold', 2, 1), e('italic', 2, 1)]],
    ['a \r b', [e('bold', 0, 5), e('underline', 2, 1)], [e('bold', 0, 4)]],
    // remove_empty_entities, get_message_entities, sorting
    ['abc', [e('bold', 1, 0)], []],
    ['abc', [e('bold', 2, 1), e('italic', 0, 1)], [e('italic', 0, 1), e('bold', 2, 1)]],
    ['abc', [e('url', 0, 3), e('mention', 0, 1), e('bot_command', 0, 1)], []], // the Bot API ignores detected types from clients
    ['abc', [e('text_mention', 0, 1, { userId: 0 })], []],
    [' ', [e('bold', 0, 1)], []],
    // text_link urls are checked and normalised (LinkManager::check_link)
    ['abc', [e('text_link', 0, 3, { url: 't.me' })], [e('text_link', 0, 3, { url: 'http://t.me/' })]],
    ['abc', [e('text_link', 0, 3, { url: 'HTTPS://Example.COM:443/A?b#c' })], [e('text_link', 0, 3, { url: 'https://example.com:443/A?b#c' })]],
    ['abc', [e('text_link', 0, 3, { url: 'tg://user?id=5' })], [e('text_mention', 0, 3, { userId: 5 })]],
    ['abc', [e('pre', 0, 3, { language: '' })], [e('pre', 0, 3)]],
    ['abc', [e('custom_emoji', 0, 3, { customEmojiId: '5368324170671202286' })], [e('custom_emoji', 0, 3, { customEmojiId: '5368324170671202286' })]],
    ['👍x', [e('bold', 0, 2), e('italic', 2, 1)], [e('bold', 0, 2), e('italic', 2, 1)]],
  ];
  it.each(cases)('%j %j', (text, input, output) => {
    expect(normalizeEntities(text, input)).toEqual(output);
  });

  it('accepts the Bot API JSON shape (user.id, custom_emoji_id)', () => {
    const raw = [
      { type: 'text_mention', offset: 0, length: 1, user: { id: 7 } },
      { type: 'custom_emoji', offset: 1, length: 1, custom_emoji_id: '42' },
    ] as unknown as MessageEntity[];
    expect(normalizeEntities('ab', raw)).toEqual([e('text_mention', 0, 1, { userId: 7 }), e('custom_emoji', 1, 1, { customEmojiId: '42' })]);
  });

  const errors: Array<[text: string, input: MessageEntity[], message: string]> = [
    // telegram-bot-api Client::get_text_entity / get_text_entity_type
    ['abc', [{ type: 'underlined' as EntityType, offset: 0, length: 1 }], "Can't parse MessageEntity: Unsupported type specified"],
    ['abc', [{ type: '' as EntityType, offset: 0, length: 1 }], "Can't parse MessageEntity: Type is not specified"],
    ['abc', [{ type: 'text_link', offset: 0, length: 1 }], 'Can\'t parse MessageEntity: Can\'t find field "url"'],
    ['abc', [{ type: 'text_mention', offset: 0, length: 1 }], 'Can\'t parse MessageEntity: Can\'t find field "user"'],
    ['abc', [{ type: 'bold', offset: 0.5, length: 1 }], 'Can\'t parse MessageEntity: Field "offset" must be a valid Number'],
    // tdlib get_message_entities
    ['abc', [e('custom_emoji', 0, 1, { customEmojiId: '0' })], 'Invalid custom emoji identifier specified'],
    ['abc', [e('text_link', 0, 1, { url: 'abc' })], "Entity URL 'abc' is invalid: Wrong HTTP URL"],
    ['abc', [e('text_link', 0, 1, { url: 'javascript:alert(1)' })], "Entity URL 'javascript:alert(1)' is invalid: Wrong port number specified in the URL"],
    // tdlib fix_formatted_text / clean_input_string_with_entities: refused, not clipped
    ['aba caba', [e('bold', 5, 10)], 'Entity beginning at UTF-16 offset 5 ends after the end of the text at UTF-16 offset 15'],
    ['ab', [e('bold', 3, 1)], 'Entity begins after the end of the text at UTF-16 offset 3'],
    ['👍', [e('bold', 1, 1)], 'Entity begins in a middle of a UTF-16 symbol at byte offset 4'],
    ['abc', [e('bold', -1, 2)], 'Receive an entity with incorrect offset -1'],
    ['abc', [e('bold', 0, -2)], 'Receive an entity with incorrect length -2'],
  ];
  it.each(errors)('%j %j is refused', (text, input, message) => {
    expect(errorOf(() => normalizeEntities(text, input))).toBe(message);
  });
});

describe('prepareMessageText (Bot API sendMessage: parse, then tdlib fix_formatted_text with detection)', () => {
  type PrepareCase = [input: string, options: Parameters<typeof prepareMessageText>[1], text: string, entities: MessageEntity[]];
  const cases: PrepareCase[] = [
    // tdlib test: trimmed, entities found
    [
      '  /test @abaca #ORD $ABC  telegram.org ',
      {},
      '/test @abaca #ORD $ABC  telegram.org',
      [e('bot_command', 0, 5), e('mention', 6, 6), e('hashtag', 13, 4), e('cashtag', 18, 4), e('url', 24, 12)],
    ],
    // tdlib test: found entities merged with given ones, splittable ones split around them
    ['example.com a', { entities: [e('italic', 0, 13)] }, 'example.com a', [e('url', 0, 11), e('italic', 0, 11), e('italic', 11, 2)]],
    ['a example.com', { entities: [e('italic', 0, 13)] }, 'a example.com', [e('italic', 0, 2), e('url', 2, 11), e('italic', 2, 11)]],
    ['example.com', { entities: [e('pre', 0, 3)] }, 'example.com', [e('pre', 0, 3)]],
    ['example.com', { entities: [e('blockquote', 0, 11)] }, 'example.com', [e('blockquote', 0, 11), e('url', 0, 11)]],
    ['@tests @tests', { entities: [e('italic', 0, 13)] }, '@tests @tests', [e('mention', 0, 6), e('italic', 0, 6), e('italic', 6, 1), e('mention', 7, 6), e('italic', 7, 6)]],
    ['a ', { entities: [e('italic', 0, 2), e('bold', 0, 1)] }, 'a', [e('bold', 0, 1), e('italic', 0, 1)]],
    // parse_mode path: trailing spaces inside an entity are trimmed, pre wins over an identical code
    ['  <b>hi </b> @durov  ', { parseMode: 'HTML' }, 'hi  @durov', [e('bold', 0, 3), e('mention', 4, 6)]],
    ['<pre><code>x</code></pre>', { parseMode: 'HTML' }, 'x', [e('pre', 0, 1)]],
    ['a\tb\r\nc', {}, 'a b\nc', []],
    ['see t.me', { detectEntities: false }, 'see t.me', []],
    ['\n \n', { allowEmpty: true }, '', []],
  ];
  it.each(cases)('%j %j', (input, options, text, entities) => {
    expect(prepareMessageText(input, options)).toEqual({ text, entities });
  });

  it('refuses what Telegram refuses', () => {
    expect(errorOf(() => prepareMessageText('\n \n'))).toBe('Text must be non-empty');
    expect(errorOf(() => prepareMessageText('<b> </b>', { parseMode: 'HTML' }))).toBe('Text must be non-empty');
    expect(errorOf(() => prepareMessageText('x'.repeat(32769)))).toBe('Text is too long');
    expect(errorOf(() => prepareMessageText('<b>', { parseMode: 'HTML' }))).toBe(
      'Can\'t parse entities: Can\'t find end tag corresponding to start tag "b"',
    );
  });
});

// ---------------------------------------------------------------------------------
// utf16Length
// ---------------------------------------------------------------------------------

describe('utf16Length', () => {
  const cases: Array<[string, number]> = [
    ['', 0],
    ['abc', 3],
    ['я', 1],
    ['👍', 2],
    ['➡️', 2],
    ['👨‍👩‍👧', 8],
  ];
  it.each(cases)('%j has %i UTF-16 code units', (text, length) => {
    expect(utf16Length(text)).toBe(length);
  });

  it('counts the parsed text, not the markup', () => {
    expect(utf16Length(parseFormatted('<b>👍</b>&amp;', 'HTML').text)).toBe(3);
  });
});

// ---------------------------------------------------------------------------------
// Rendering (not a tdlib function: checked by round trips through the tdlib parsers)
// ---------------------------------------------------------------------------------

describe('toHtml / toMarkdownV2', () => {
  const html: Array<[text: string, entities: MessageEntity[], out: string]> = [
    ['a<b&c>', [], 'a&lt;b&amp;c&gt;'],
    ['hello world', [e('bold', 0, 5), e('italic', 3, 5)], '<b>hel<i>lo</i></b><i> wo</i>rld'],
    ['x', [e('pre', 0, 1, { language: 'py' })], '<pre><code class="language-py">x</code></pre>'],
    ['x', [e('text_link', 0, 1, { url: 'http://a.b/?q="1"&r=2' })], '<a href="http://a.b/?q=&quot;1&quot;&amp;r=2">x</a>'],
    ['x', [e('text_mention', 0, 1, { userId: 42 })], '<a href="tg://user?id=42">x</a>'],
    ['👍', [e('custom_emoji', 0, 2, { customEmojiId: '5368324170671202286' })], '<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>'],
    ['q', [e('expandable_blockquote', 0, 1), e('spoiler', 0, 1)], '<blockquote expandable><tg-spoiler>q</tg-spoiler></blockquote>'],
    ['@durov', [e('mention', 0, 6)], '@durov'],
  ];
  it.each(html)('toHtml(%j, %j)', (text, entities, out) => {
    expect(toHtml(text, entities)).toBe(out);
  });

  const markdown: Array<[text: string, entities: MessageEntity[], out: string]> = [
    ['a.b_c', [], 'a\\.b\\_c'],
    ['x', [e('italic', 0, 1), e('underline', 0, 1)], '_``__x__``_'], // the "___" ambiguity of the docs
    ['a`b\\', [e('code', 0, 4)], '`a\\`b\\\\`'],
    ['x', [e('text_link', 0, 1, { url: 'http://a.b/(c)' })], '[x](http://a.b/(c\\))'],
    ['a\nb\nc', [e('blockquote', 0, 4)], '>a\n>b\nc'],
    ['a\nb', [e('expandable_blockquote', 0, 3)], '>a\n>b||'],
  ];
  it.each(markdown)('toMarkdownV2(%j, %j)', (text, entities, out) => {
    expect(toMarkdownV2(text, entities)).toBe(out);
  });

  // round trips: parse (tdlib rules) -> render -> parse gives the same text and entities
  const sources: Array<[mode: 'HTML' | 'MarkdownV2', input: string]> = [
    ['HTML', '<b>bold <i>italic bold <s>strike <tg-spoiler>spoiler</tg-spoiler></s></i></b> <u>u</u> <a href="http://t.me/">link</a>'],
    ['HTML', '<blockquote>quote <code>code</code>\nline\n</blockquote><pre><code class="language-ts">let a = 1 &lt; 2;</code></pre>'],
    ['HTML', '➡️ <a href="tg://user?id=123">who</a> <tg-emoji emoji-id="5368324170671202286">👍</tg-emoji> &amp; &quot;q&quot;'],
    ['MarkdownV2', '*bold _italic bold ~italic bold strikethrough ||italic bold strikethrough spoiler||~ __underline italic bold___ bold*'],
    ['MarkdownV2', '>quote \\> line\n>second *bold*\nplain [link](http://t.me/x) `c\\`d` \\. \\!'],
    ['MarkdownV2', '**>expandable\n>more||\n```js\nlet x = "\\`";\n```'],
  ];
  it.each(sources)('%s round trip of %j', (mode, input) => {
    const parsed = parseFormatted(input, mode);
    expect(parseFormatted(toHtml(parsed.text, parsed.entities), 'HTML')).toEqual(parsed);
    expect(parseFormatted(toMarkdownV2(parsed.text, parsed.entities), 'MarkdownV2')).toEqual(parsed);
  });
});
