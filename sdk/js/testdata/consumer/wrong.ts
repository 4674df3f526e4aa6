// What tsc --strict must refuse: a media id as a string, a token getter that returns a number,
// and a resume point read under a name the declarations do not have.
import { attach } from '@playhead/player';

declare const video: HTMLVideoElement;

const session = attach(video, { baseUrl: '', mediaId: '42', getToken: () => 42 });
session.ready.then((r) => r.position_ms);
