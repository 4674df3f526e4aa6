/** What attach needs to report one media's position to Playhead. */
export interface AttachOptions {
  /** Playhead's origin and any path before /v1, such as "https://playhead.school.example"; "" (the default) for the page's own origin. */
  baseUrl?: string;
  /** The media's id, as GET /v1/media/{id} names it. */
  mediaId: number;
  /** Returns the member's bearer token: called at the start and again whenever Playhead answers 401 (then the request is retried once). */
  getToken: () => string | Promise<string>;
  /** The collection the player was opened from (a course), which decides what comes next once the media is watched. */
  collection?: string;
  /** The media's duration_ms from GET /v1/media/{id}: positions are clamped to it. */
  durationMs?: number;
  /** Called with each position Playhead accepted (204). */
  onSaved?: (positionMs: number) => void;
  /** Called with each error: a refused report, an open that failed, Playhead out of reach. Default: console.warn. */
  onError?: (error: PlayheadError) => void;
  /** The interval of reports while playing, in milliseconds. Default 5000, what Playhead expects. */
  reportEveryMs?: number;
  /** Whether reports carry the playback quality (time to first frame, stalls, rendition, a fatal error's code). Default true. */
  quality?: boolean;
}

/** Where the member resumes, once the open answered. */
export interface Resume {
  /** The position attach seeks to, in milliseconds: 0 when finished. */
  positionMs: number;
  /** The member watched the media to its end: it starts over. */
  finished: boolean;
}

/** One media element reporting one media. */
export interface Session {
  /** Resolves once the media is opened and the resume point is being applied; rejects with the open's error. */
  readonly ready: Promise<Resume>;
  /** Sends the position one last time and stops reporting. */
  detach(): Promise<void>;
}

/** Starts reporting video's position for options.mediaId: opens, resumes, reports. An element reports one media at a time: a session still attached to video is detached first. */
export function attach(video: HTMLMediaElement, options: AttachOptions): Session;

/** An answer of Playhead's that is not a success ({"error": …}), or a request that did not reach it (status 0). */
export class PlayheadError extends Error {
  constructor(status: number, message: string);
  readonly status: number;
}
