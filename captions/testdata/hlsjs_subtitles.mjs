// Reads each master playlist file given as an argument as hls.js (npm, pinned in package.json;
// the player the web page runs) does, with its own M3U8Parser, and prints one JSON line per
// file: the SUBTITLES renditions it found, in order. hls.js finds EXT-X-MEDIA tags with a
// regular expression whose lines end at CR, LF, U+2028 and U+2029, so this is the view of a
// client that takes those as line breaks.
import { readFileSync } from 'node:fs';
import { M3U8Parser } from 'hls.js';

const base = 'https://playhead.invalid/master.m3u8';
for (const file of process.argv.slice(2)) {
  const text = readFileSync(file, 'utf8');
  const parsed = M3U8Parser.parseMasterPlaylist(text, base);
  const media = M3U8Parser.parseMasterPlaylistMedia(text, base, parsed);
  console.log(JSON.stringify({
    file,
    subtitles: (media.SUBTITLES || []).map((r) => ({
      group: r.groupId, name: r.name, language: r.lang || '', default: r.default, autoselect: r.autoselect, uri: r.url,
    })),
  }));
}
