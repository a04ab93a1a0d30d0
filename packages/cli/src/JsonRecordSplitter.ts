/** Where a record (or an error) starts in the input: 1-based line and column, 0-based byte offset. */
export interface InputPosition {
  line: number;
  /** 1-based byte within the line (equal to the character column for ASCII input). */
  column: number;
  byte: number;
}

/** Malformed JSON input, with the position of the error. */
export class JsonInputError extends Error {
  constructor(
    readonly reason: string,
    readonly position: InputPosition,
  ) {
    super(`line ${position.line}, column ${position.column} (byte ${position.byte}): ${reason}`);
    this.name = 'JsonInputError';
  }
}

/** How the input is laid out: see {@link JsonRecordSplitter}. */
export type InputFormat = 'auto' | 'array' | 'ndjson';

/** Largest single record accepted: a record must fit in memory once while it is parsed. */
export const MAX_RECORD_BYTES = 256 * 1024 * 1024;

const NL = 0x0a;
const CR = 0x0d;
const SP = 0x20;
const TAB = 0x09;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

const BOM = [0xef, 0xbb, 0xbf];

const enum Mode {
  Detect,
  ArrayStart,
  ArrayValue,
  Element,
  AfterElement,
  ArrayDone,
  Lines,
}

function isSpace(b: number): boolean {
  return b === SP || b === NL || b === CR || b === TAB;
}

/**
 * Splits a stream of bytes holding one JSON array, or newline-delimited JSON (one value per
 * line), into values, chunk by chunk: only the record being read is held in memory, so input
 * of any size goes through with a flat heap. Input whose first non-blank byte is `[` is read
 * as an array, anything else as NDJSON (blank lines skipped). Each record is parsed with
 * JSON.parse; errors carry the line, column and byte where they were found.
 *
 * Usage: `write(chunk, onValue)` for each chunk, then `end(onValue)`.
 */
export class JsonRecordSplitter {
  private mode: Mode;
  /** Absolute offset of the first byte of the current chunk. */
  private base = 0;
  private line = 1;
  /** Absolute offset of the first byte of the current line. */
  private lineStart = 0;
  // The record being read: earlier chunks' parts, its start, and the scanner state inside it.
  private parts: Buffer[] = [];
  private partBytes = 0;
  private start: InputPosition = { line: 1, column: 1, byte: 0 };
  /** The brackets and braces open in the current array element, innermost last. */
  private open: number[] = [];
  private inString = false;
  private escaped = false;
  /** In NDJSON mode: a record (line) has started and not ended yet. */
  private lineOpen = false;
  /** Records handed to onValue so far. */
  count = 0;

  /**
   * @param format `auto` (default): an array when the first non-blank byte is `[`, else NDJSON;
   *   `ndjson` for NDJSON whose lines may themselves be arrays; `array` to refuse anything else
   */
  constructor(private readonly format: InputFormat = 'auto') {
    this.mode = format === 'ndjson' ? Mode.Lines : Mode.Detect;
  }

  /** Bytes consumed so far. */
  get bytesRead(): number {
    return this.base;
  }

  /**
   * Scans one chunk and calls `onValue` for each record completed in it.
   * @throws JsonInputError on malformed input; also anything `onValue` throws
   */
  write(chunk: Buffer, onValue: (value: unknown, at: InputPosition) => void): void {
    let i = 0;
    const n = chunk.length;
    // A UTF-8 byte order mark (EF BB BF) before the first value is skipped, even split across chunks.
    while (
      (this.mode === Mode.Detect || (this.mode === Mode.Lines && !this.lineOpen)) &&
      i < n &&
      this.base + i < 3 &&
      chunk[i] === BOM[this.base + i]
    )
      i++;
    let recStart = this.mode === Mode.Element || (this.mode === Mode.Lines && this.lineOpen) ? 0 : -1;
    while (i < n) {
      const b = chunk[i]!;
      switch (this.mode) {
        case Mode.Lines: {
          if (recStart < 0) {
            // Between records: skip blank space, a record starts at the first other byte.
            if (b === NL) this.newline(i);
            else if (!isSpace(b)) {
              recStart = i;
              this.lineOpen = true;
              this.begin(i);
              continue;
            }
            i++;
            continue;
          }
          const nl = chunk.indexOf(NL, i);
          if (nl < 0) {
            i = n;
            continue;
          }
          this.lineOpen = false;
          this.emit(chunk, recStart, nl, onValue);
          recStart = -1;
          this.newline(nl);
          i = nl + 1;
          continue;
        }
        case Mode.Element: {
          if (this.inString) {
            if (this.escaped) this.escaped = false;
            else if (b === BACKSLASH) this.escaped = true;
            else if (b === QUOTE) this.inString = false;
            else if (b === NL) this.newline(i);
          } else if (b === QUOTE) {
            this.inString = true;
          } else if (b === LBRACE || b === LBRACKET) {
            this.open.push(b);
          } else if (b === RBRACE || b === RBRACKET) {
            if (this.open.length === 0) {
              if (b === RBRACE) throw this.errorAt(i, "unexpected '}'");
              this.emit(chunk, recStart, i, onValue);
              recStart = -1;
              this.mode = Mode.ArrayDone;
            } else if (this.open.pop() !== (b === RBRACE ? LBRACE : LBRACKET)) {
              // A close that does not match its opener ends the element here, so that JSON.parse
              // reports this byte, not the end of the input where the array turns out unclosed.
              this.emit(chunk, recStart, i + 1, onValue);
            }
          } else if (b === COMMA && this.open.length === 0) {
            this.emit(chunk, recStart, i, onValue);
            recStart = -1;
            this.mode = Mode.ArrayValue;
          } else if (b === NL) {
            this.newline(i);
          }
          i++;
          continue;
        }
        default:
          break;
      }
      // The states between records: only blank space and the array's own punctuation.
      if (isSpace(b)) {
        if (b === NL) this.newline(i);
        i++;
        continue;
      }
      switch (this.mode) {
        case Mode.Detect:
          if (b === LBRACKET) {
            this.mode = Mode.ArrayStart;
            i++;
          } else if (this.format === 'array') {
            throw this.errorAt(i, `expected a JSON array, found '${String.fromCharCode(b)}'`);
          } else {
            this.mode = Mode.Lines;
          }
          continue;
        case Mode.ArrayStart:
        case Mode.ArrayValue:
          if (b === RBRACKET && this.mode === Mode.ArrayStart) {
            this.mode = Mode.ArrayDone;
            i++;
            continue;
          }
          if (b === COMMA || b === RBRACKET) throw this.errorAt(i, `expected a value, found '${String.fromCharCode(b)}'`);
          this.mode = Mode.Element;
          this.open = [];
          this.inString = false;
          this.escaped = false;
          recStart = i;
          this.begin(i);
          continue;
        case Mode.ArrayDone:
          throw this.errorAt(i, 'unexpected data after the end of the array');
        default:
          throw this.errorAt(i, 'internal: unexpected scanner state');
      }
    }
    if (recStart >= 0 && (this.mode === Mode.Element || this.mode === Mode.Lines)) {
      this.partBytes += n - recStart;
      if (this.partBytes > MAX_RECORD_BYTES) {
        throw new JsonInputError(
          `record larger than ${MAX_RECORD_BYTES} bytes (is the input one huge value instead of an array or NDJSON?)`,
          this.start,
        );
      }
      // Copy: the stream may reuse the chunk's memory.
      this.parts.push(Buffer.from(chunk.subarray(recStart, n)));
    }
    this.base += n;
  }

  /**
   * Ends the input: the last NDJSON line without a newline is a record; an array must be closed.
   * @throws JsonInputError when the input ends inside the array or inside a record
   */
  end(onValue: (value: unknown, at: InputPosition) => void): void {
    if (this.mode === Mode.Lines && this.lineOpen) {
      this.lineOpen = false;
      this.emit(Buffer.alloc(0), 0, 0, onValue);
    } else if (this.mode === Mode.Detect && this.format === 'array') {
      throw new JsonInputError('unexpected end of input: expected a JSON array', this.position(this.base));
    } else if (this.mode === Mode.ArrayStart || this.mode === Mode.ArrayValue || this.mode === Mode.Element) {
      throw new JsonInputError('unexpected end of input: the array is not closed', this.position(this.base));
    }
  }

  private begin(i: number): void {
    this.start = this.position(this.base + i);
    this.parts = [];
    this.partBytes = 0;
  }

  private newline(i: number): void {
    this.line++;
    this.lineStart = this.base + i + 1;
  }

  private position(abs: number): InputPosition {
    return { line: this.line, column: abs - this.lineStart + 1, byte: abs };
  }

  private errorAt(i: number, reason: string): JsonInputError {
    return new JsonInputError(reason, this.position(this.base + i));
  }

  /** Parses the record made of the saved parts plus chunk[from, to) and hands it over. */
  private emit(chunk: Buffer, from: number, to: number, onValue: (value: unknown, at: InputPosition) => void): void {
    let text: string;
    if (this.parts.length === 0) {
      text = chunk.toString('utf8', from, to);
    } else {
      this.parts.push(chunk.subarray(from, to));
      text = Buffer.concat(this.parts).toString('utf8');
      this.parts = [];
      this.partBytes = 0;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw this.parseError(text, (err as Error).message);
    }
    this.count++;
    onValue(value, this.start);
  }

  /** Places a JSON.parse error: its "at position N" is a character index within the record. */
  private parseError(text: string, message: string): JsonInputError {
    const m = /at position (\d+)/.exec(message);
    const reason = message.replace(/ in JSON at position \d+.*$/, '').replace(/, ".*" is not valid JSON$/s, '');
    if (m === null) return new JsonInputError(`${reason} in the record starting here`, this.start);
    const prefix = text.slice(0, Number(m[1]));
    const byte = this.start.byte + Buffer.byteLength(prefix, 'utf8');
    const lastNl = prefix.lastIndexOf('\n');
    if (lastNl < 0) return new JsonInputError(reason, { line: this.start.line, column: this.start.column + byte - this.start.byte, byte });
    const lines = prefix.split('\n').length - 1;
    return new JsonInputError(reason, {
      line: this.start.line + lines,
      column: Buffer.byteLength(prefix.slice(lastNl + 1), 'utf8') + 1,
      byte,
    });
  }
}
