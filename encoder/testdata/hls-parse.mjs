// Parses an encode's playlists with hls-parser (npm, a parser nobody on the team wrote) in
// strict mode, which throws on anything RFC 8216 forbids, and prints what the encoder's
// Go test checks as JSON: for the master, every variant (I-frame ones marked); for each media
// playlist, its target duration and segments. Usage: node hls-parse.mjs DIR (the encode's
// output directory, whose master.m3u8 is read, then every playlist it names).
import HLS from 'hls-parser';
import {readFileSync} from 'node:fs';
import {join, dirname} from 'node:path';

HLS.setOptions({strictMode: true});
const dir = process.argv[2];
const parse = (rel) => HLS.parse(readFileSync(join(dir, rel), 'utf8'));

const master = parse('master.m3u8');
if (!master.isMasterPlaylist) throw new Error('master.m3u8 is not a master playlist');
const media = (rel) => {
  const p = parse(rel);
  if (p.isMasterPlaylist) throw new Error(`${rel} is not a media playlist`);
  const base = dirname(rel);
  return {
    uri: rel,
    targetDuration: p.targetDuration,
    iFramesOnly: p.isIFrame === true,
    endlist: p.endlist,
    segments: p.segments.map((s) => ({
      uri: join(base, s.uri),
      duration: s.duration,
      byterange: s.byterange ? {length: s.byterange.length, offset: s.byterange.offset} : null,
      map: s.map ? {uri: join(base, s.map.uri), byterange: s.map.byterange ? {length: s.map.byterange.length, offset: s.map.byterange.offset} : null} : null,
    })),
  };
};
const audio = new Map();
const out = {version: master.version, independentSegments: master.independentSegments, variants: [], playlists: {}};
for (const v of master.variants) {
  const groups = (v.audio || []).map((r) => {
    if (r.uri && !audio.has(r.uri)) audio.set(r.uri, media(r.uri));
    return {groupId: r.groupId, uri: r.uri, channels: r.channels};
  });
  out.variants.push({
    uri: v.uri, iFrameOnly: v.isIFrameOnly === true, bandwidth: v.bandwidth, averageBandwidth: v.averageBandwidth,
    codecs: v.codecs, width: v.resolution?.width, height: v.resolution?.height, frameRate: v.frameRate, audio: groups,
  });
  out.playlists[v.uri] = media(v.uri);
}
for (const [uri, p] of audio) out.playlists[uri] = p;
console.log(JSON.stringify(out));
