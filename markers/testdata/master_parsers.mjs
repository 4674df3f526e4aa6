// Parses the master playlist file given as the argument with two third-party parsers (npm,
// pinned in package.json): hls-parser in strict mode, which throws on what RFC 8216 forbids,
// and m3u8-parser (video.js's), whose warnings count as refusals here. Prints one JSON line:
// the session data hls-parser read and the variants and EXT-X-SESSION-DATA lines m3u8-parser
// read, for the Go test to check. Exits 1 when either refuses the playlist.
import { readFileSync } from 'node:fs';
import HLS from 'hls-parser';
import { Parser } from 'm3u8-parser';

const text = readFileSync(process.argv[2], 'utf8');

HLS.setOptions({ strictMode: true });
let strict;
try {
  strict = HLS.parse(text);
} catch (err) {
  console.error(`hls-parser: ${err.message}`);
  process.exit(1);
}

const parser = new Parser();
const warnings = [];
parser.on('warn', (w) => warnings.push(w.message));
// m3u8-parser keeps no EXT-X-SESSION-DATA of its own: a custom parser collects the lines.
parser.addParser({ expression: /^#EXT-X-SESSION-DATA:/, customType: 'sessionData', dataParser: (line) => line });
parser.push(text);
parser.end();
if (warnings.length > 0) {
  console.error(`m3u8-parser: ${warnings.join('; ')}`);
  process.exit(1);
}

console.log(JSON.stringify({
  hlsParser: {
    master: strict.isMasterPlaylist,
    variants: strict.variants.length,
    sessionData: strict.sessionDataList.map((d) => ({ id: d.id, uri: d.uri })),
  },
  m3u8Parser: {
    variants: (parser.manifest.playlists || []).length,
    sessionData: parser.manifest.custom ? [].concat(parser.manifest.custom.sessionData) : [],
  },
}));
