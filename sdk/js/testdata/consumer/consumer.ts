// A consumer of @playhead/player as an integrator writes it, compiled by package_test.go under
// tsc --strict against the package's own declarations.
import { attach, PlayheadError, type AttachOptions, type Resume, type Session } from '@playhead/player';

declare const video: HTMLVideoElement;

const options: AttachOptions = {
  baseUrl: 'https://playhead.school.example',
  mediaId: 42,
  getToken: async () => 'token',
  collection: 'Go 101',
  durationMs: 600_000,
  onSaved: (positionMs: number) => console.log(positionMs),
  onError: (err: PlayheadError) => console.warn(err.status, err.message),
  reportEveryMs: 5000,
};
const session: Session = attach(video, options);
session.ready.then((r: Resume) => {
  const start: number = r.positionMs / 1000;
  const over: boolean = r.finished;
  console.log(start, over);
});
attach(document.createElement('audio'), { baseUrl: '', mediaId: 1, getToken: () => 'token' });
const detached: Promise<void> = session.detach();
void detached;
