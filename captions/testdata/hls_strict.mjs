// Parses each playlist file given as an argument with hls-parser (npm, pinned in
// package.json) in strict mode, which throws on what RFC 8216 forbids, and prints one JSON
// line per file: what the Go test checks against what it expects. Exits 1 on the first
// playlist hls-parser refuses.
import { readFileSync } from 'node:fs';
import HLS from 'hls-parser';

HLS.setOptions({ strictMode: true });

for (const file of process.argv.slice(2)) {
  let playlist;
  try {
    playlist = HLS.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    console.error(`${file}: ${err.message}`);
    process.exit(1);
  }
  if (playlist.isMasterPlaylist) {
    console.log(JSON.stringify({
      file,
      master: true,
      variants: playlist.variants.map((v) => ({
        uri: v.uri,
        iframe: v.isIFrameOnly,
        subtitles: v.subtitles.map((r) => ({
          group: r.groupId, name: r.name, language: r.language, default: r.isDefault, autoselect: r.autoselect, uri: r.uri,
        })),
      })),
    }));
  } else {
    console.log(JSON.stringify({
      file,
      master: false,
      targetDuration: playlist.targetDuration,
      endlist: playlist.endlist,
      segments: playlist.segments.map((s) => ({ uri: s.uri, duration: s.duration })),
    }));
  }
}
