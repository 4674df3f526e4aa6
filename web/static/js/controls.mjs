// The player's own controls: play/pause, a seek bar that shows storyboard previews (on hover,
// and while seeking with the keyboard) and the chapters' starts, the time, mute, a captions menu and full screen. The
// video element's native controls cannot show a preview above their seek bar, so the page
// draws its own; every control is a real button, range input or select, with a name a screen
// reader reads.

import { clock } from './common.mjs';

const KEY_SEEK_S = 5; // ← and → on the seek bar
const PAGE_SEEK_S = 30; // Page Up and Page Down
const PREVIEW_AFTER_KEY_MS = 1500; // how long a keyboard seek's preview stays up

// parseStoryboard reads the storyboard's WebVTT (as Playhead serves it: every cue a signed
// sprite URL with #xywh=x,y,w,h) into cues. Lines that are not such cues are skipped.
export function parseStoryboard(text, base) {
  const cues = [];
  const blocks = text.replace(/\r\n?/g, '\n').split(/\n\n+/);
  const stamp = (s) => {
    const m = /^(?:(\d+):)?(\d{2}):(\d{2})\.(\d{3})$/.exec(s.trim());
    return m ? (Number(m[1] || 0) * 3600 + Number(m[2]) * 60 + Number(m[3])) + Number(m[4]) / 1000 : NaN;
  };
  for (const block of blocks) {
    const lines = block.split('\n');
    const timing = lines.findIndex((l) => l.includes('-->'));
    if (timing < 0 || timing + 1 >= lines.length) continue;
    const [from, to] = lines[timing].split('-->');
    const [uri, fragment] = lines[timing + 1].split('#xywh=');
    const box = (fragment || '').split(',').map(Number);
    const start = stamp(from);
    const end = stamp(to.split(/\s/).filter(Boolean)[0] || '');
    if (!uri || box.length !== 4 || box.some((n) => !Number.isFinite(n) || n < 0) || !(end > start)) continue;
    cues.push({ start, end, url: new URL(uri, base).href, x: box[0], y: box[1], w: box[2], h: box[3] });
  }
  return cues;
}

// cueAt finds the cue covering t (seconds) in cues sorted by start.
function cueAt(cues, t) {
  let lo = 0;
  let hi = cues.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cues[mid].end <= t) lo = mid + 1;
    else if (cues[mid].start > t) hi = mid - 1;
    else return cues[mid];
  }
  return cues.length && t >= cues[cues.length - 1].end ? cues[cues.length - 1] : null;
}

// mountControls wires the controls in root (the player's #controls) to video. durationS is the
// API's duration (the bar's length until the video knows its own). It returns what the page
// calls later: setStoryboard(cues), setChapters(starts), setCaptionTracks(tracks, select) and
// seekTo(seconds).
export function mountControls(root, video, durationS) {
  const $ = (id) => root.querySelector(`#${id}`);
  const play = $('play');
  const seek = $('seek');
  const time = $('time');
  const mute = $('mute');
  const captions = $('captions');
  const captionsBox = $('captions-box');
  const full = $('fullscreen');
  const preview = $('preview');
  const previewImage = $('preview-image');
  const previewTime = $('preview-time');
  let cues = [];
  let dragging = false;
  let keyPreviewTimer = 0;

  const duration = () => (Number.isFinite(video.duration) && video.duration > 0 ? video.duration : durationS);
  const label = (s) => `${clock(s * 1000)} of ${clock(duration() * 1000)}`;

  function showTime() {
    const d = duration();
    seek.max = String(d || 0);
    if (!dragging) seek.value = String(video.currentTime || 0);
    seek.setAttribute('aria-valuetext', label(Number(seek.value)));
    time.textContent = `${clock((video.currentTime || 0) * 1000)} / ${clock(d * 1000)}`;
  }

  // icon shows the one of a button's icons named name (SVG elements have no hidden property:
  // the attribute it is).
  const icon = (button, name) => {
    for (const svg of button.querySelectorAll('svg[data-icon]')) svg.toggleAttribute('hidden', svg.dataset.icon !== name);
  };

  function showPlaying() {
    const paused = video.paused || video.ended;
    icon(play, paused ? 'play' : 'pause');
    play.setAttribute('aria-label', paused ? 'Play' : 'Pause');
  }

  // showPreview puts the storyboard tile of second t above the bar at fraction x (0…1).
  function showPreview(t, x) {
    const cue = cueAt(cues, t);
    previewTime.textContent = clock(t * 1000);
    preview.hidden = false;
    preview.dataset.time = String(t);
    if (cue) {
      previewImage.hidden = false;
      previewImage.style.width = `${cue.w}px`;
      previewImage.style.height = `${cue.h}px`;
      previewImage.style.backgroundImage = `url("${cue.url}")`;
      previewImage.style.backgroundPosition = `-${cue.x}px -${cue.y}px`;
      preview.dataset.sprite = cue.url;
      preview.dataset.tile = `${cue.x},${cue.y},${cue.w},${cue.h}`;
    } else {
      previewImage.hidden = true;
      delete preview.dataset.sprite;
      delete preview.dataset.tile;
    }
    const bar = seek.getBoundingClientRect();
    const half = preview.getBoundingClientRect().width / 2;
    const left = Math.min(Math.max(x * bar.width, half), bar.width - half);
    preview.style.left = `${left}px`;
  }

  function hidePreview() {
    preview.hidden = true;
  }

  function seekTo(t) {
    const d = duration();
    const to = Math.min(Math.max(t, 0), d > 0 ? d : t);
    video.currentTime = to;
    seek.value = String(to);
    showTime();
    return to;
  }

  play.addEventListener('click', () => (video.paused || video.ended ? video.play().catch(() => {}) : video.pause()));
  video.addEventListener('click', () => play.click());
  for (const e of ['play', 'pause', 'ended', 'playing']) video.addEventListener(e, showPlaying);
  for (const e of ['timeupdate', 'durationchange', 'loadedmetadata', 'seeked']) video.addEventListener(e, showTime);

  seek.addEventListener('pointermove', (e) => {
    const bar = seek.getBoundingClientRect();
    const x = Math.min(Math.max((e.clientX - bar.left) / bar.width, 0), 1);
    showPreview(x * duration(), x);
  });
  seek.addEventListener('pointerleave', () => { if (!dragging) hidePreview(); });
  seek.addEventListener('pointerdown', () => { dragging = true; });
  seek.addEventListener('input', () => {
    const t = Number(seek.value);
    seek.setAttribute('aria-valuetext', label(t));
    if (dragging) showPreview(t, duration() ? t / duration() : 0);
  });
  seek.addEventListener('change', () => {
    dragging = false;
    seekTo(Number(seek.value));
  });
  seek.addEventListener('pointerup', () => { dragging = false; });
  // The keyboard moves by seconds that matter, not the range's step, and shows where it went.
  seek.addEventListener('keydown', (e) => {
    const steps = { ArrowLeft: -KEY_SEEK_S, ArrowDown: -KEY_SEEK_S, ArrowRight: KEY_SEEK_S, ArrowUp: KEY_SEEK_S,
      PageDown: -PAGE_SEEK_S, PageUp: PAGE_SEEK_S };
    let to;
    if (e.key in steps) to = (dragging ? Number(seek.value) : video.currentTime) + steps[e.key];
    else if (e.key === 'Home') to = 0;
    else if (e.key === 'End') to = duration();
    else return;
    e.preventDefault();
    const at = seekTo(to);
    showPreview(at, duration() ? at / duration() : 0);
    clearTimeout(keyPreviewTimer);
    keyPreviewTimer = setTimeout(hidePreview, PREVIEW_AFTER_KEY_MS);
  });
  seek.addEventListener('blur', hidePreview);

  mute.addEventListener('click', () => { video.muted = !video.muted; });
  const showMuted = () => {
    icon(mute, video.muted ? 'muted' : 'sound');
    mute.setAttribute('aria-label', video.muted ? 'Unmute' : 'Mute');
  };
  video.addEventListener('volumechange', showMuted);

  full.addEventListener('click', () => {
    const player = root.closest('.player');
    if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
    else player.requestFullscreen().catch(() => {});
  });

  showTime();
  showPlaying();
  showMuted();
  const marks = $('chapter-marks');
  let chapterStarts = [];
  // showMarks puts a tick at each chapter's start, once the bar's length is known.
  function showMarks() {
    const d = duration();
    marks.replaceChildren(...(d > 0 ? chapterStarts : []).filter((t) => t > 0 && t < d).map((t) => {
      const mark = document.createElement('span');
      mark.className = 'chapter-mark';
      mark.style.left = `${(t / d) * 100}%`;
      mark.dataset.time = String(t);
      return mark;
    }));
  }
  for (const e of ['durationchange', 'loadedmetadata']) video.addEventListener(e, showMarks);

  return {
    setStoryboard(parsed) { cues = parsed; },
    // setChapters marks the chapters' starts (seconds) on the seek bar.
    setChapters(starts) {
      chapterStarts = starts;
      showMarks();
    },
    seekTo,
    // setCaptionTracks lists tracks ([{name, lang}], in the player's order) in the menu; choose
    // is called with the index chosen, -1 for off.
    setCaptionTracks(tracks, choose) {
      captions.replaceChildren(new Option('Off', '-1'));
      tracks.forEach((tr, i) => captions.append(new Option(tr.lang ? `${tr.name} (${tr.lang})` : tr.name, String(i))));
      captionsBox.hidden = tracks.length === 0;
      captions.onchange = () => choose(Number(captions.value));
    },
  };
}
