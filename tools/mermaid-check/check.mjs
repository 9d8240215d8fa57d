#!/usr/bin/env node
// Parses each Mermaid file named on the command line with the real Mermaid
// parser, so flowc's tests prove that what `flowc graph` prints is accepted
// by the library that renders it, not by a look-alike grammar.
//
// Mermaid expects a browser: its sanitizer (DOMPurify) and its diagram
// detection read `window` and `document`, so a jsdom window stands in. No
// browser is downloaded or started.
//
// Exit 0 when every file parses; 1 with the file and Mermaid's message on
// stderr for the first that does not; 2 on usage or I/O errors.

import { readFile } from 'node:fs/promises';
import { JSDOM } from 'jsdom';

const files = process.argv.slice(2);
if (files.length === 0) {
  process.stderr.write('usage: check.mjs FILE.mmd...\n');
  process.exit(2);
}

const dom = new JSDOM('<!DOCTYPE html><html><body></body></html>', { pretendToBeVisual: true });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
for (const name of ['Element', 'HTMLElement', 'Node', 'DocumentFragment', 'DOMParser', 'XMLSerializer']) {
  if (!(name in globalThis)) {
    globalThis[name] = dom.window[name];
  }
}

const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });

let failed = 0;
for (const file of files) {
  let text;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    process.stderr.write(`${file}: cannot read: ${error.message}\n`);
    process.exit(2);
  }
  try {
    // suppressErrors: false makes parse() throw instead of returning false,
    // so the message says what Mermaid refused.
    const result = await mermaid.parse(text, { suppressErrors: false });
    if (!result) {
      throw new Error('mermaid.parse returned no diagram');
    }
    if (result.diagramType !== 'flowchart-v2' && result.diagramType !== 'flowchart') {
      throw new Error(`parsed as ${result.diagramType}, not a flowchart`);
    }
    process.stdout.write(`ok ${file} (${result.diagramType})\n`);
  } catch (error) {
    failed += 1;
    process.stderr.write(`${file}: mermaid rejected it:\n${error?.message ?? error}\n`);
  }
}
process.exit(failed === 0 ? 0 : 1);
