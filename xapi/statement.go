package xapi

import (
	"crypto/sha1"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/playhead/playhead/export"
)

// The IRIs of the statements: the verb and activity types of the xAPI specification's ADL
// vocabulary and the ADL Video Profile (https://w3id.org/xapi/video).
const (
	VerbCompleted      = "http://adlnet.gov/expapi/verbs/completed"
	ActivityVideo      = "https://w3id.org/xapi/video/activity-type/video"
	ActivityCourse     = "http://adlnet.gov/expapi/activities/course"
	VideoProfile       = "https://w3id.org/xapi/video"
	activityProfile    = "http://adlnet.gov/expapi/activities/profile"
	extPlayedSegments  = "https://w3id.org/xapi/video/extensions/played-segments"
	extProgress        = "https://w3id.org/xapi/video/extensions/progress"
	extTime            = "https://w3id.org/xapi/video/extensions/time"
	extLength          = "https://w3id.org/xapi/video/extensions/length"
	extSessionID       = "https://w3id.org/xapi/video/extensions/session-id"
	extCompletionLimit = "https://w3id.org/xapi/video/extensions/completion-threshold"
)

// Statement is an xAPI statement as Playhead sends it: the properties it uses, no more.
type Statement struct {
	ID        string    `json:"id"`
	Actor     Actor     `json:"actor"`
	Verb      Verb      `json:"verb"`
	Object    Activity  `json:"object"`
	Result    Result    `json:"result"`
	Context   Context   `json:"context"`
	Timestamp time.Time `json:"timestamp"`
}

// Actor is the member, by an account on the deployment's home page: never by e-mail or name,
// which are personal data Playhead does not hold (and would not send).
type Actor struct {
	ObjectType string  `json:"objectType"`
	Account    Account `json:"account"`
}

// Account is an actor's account: the member id on the actor home page.
type Account struct {
	HomePage string `json:"homePage"`
	Name     string `json:"name"`
}

// Verb is a statement's verb.
type Verb struct {
	ID      string            `json:"id"`
	Display map[string]string `json:"display"`
}

// Activity is a statement's object, or an activity of its context.
type Activity struct {
	ObjectType string              `json:"objectType"`
	ID         string              `json:"id"`
	Definition *ActivityDefinition `json:"definition,omitempty"`
}

// ActivityDefinition is what an activity is.
type ActivityDefinition struct {
	Type string            `json:"type"`
	Name map[string]string `json:"name,omitempty"`
}

// Result is a statement's result.
type Result struct {
	Completion bool           `json:"completion"`
	Duration   string         `json:"duration,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Context is a statement's context.
type Context struct {
	ContextActivities *ContextActivities `json:"contextActivities,omitempty"`
	Platform          string             `json:"platform"`
	Extensions        map[string]any     `json:"extensions,omitempty"`
}

// ContextActivities are the activities a statement belongs to: its courses (parent) and the
// profile it follows (category).
type ContextActivities struct {
	Parent   []Activity `json:"parent,omitempty"`
	Category []Activity `json:"category,omitempty"`
}

// Activities makes the IRIs of what the statements name. The zero value is not usable.
type Activities struct {
	// Base is the IRI under which media are Base/media/{id} and collections
	// Base/collections/{name}, without a trailing slash (PLAYHEAD_XAPI_ACTIVITY_BASE).
	Base string
	// HomePage is the actors' account home page (PLAYHEAD_XAPI_ACTOR_HOMEPAGE).
	HomePage string
}

func (a Activities) media(id int64) string { return a.Base + "/media/" + strconv.FormatInt(id, 10) }

func (a Activities) collection(name string) string {
	return a.Base + "/collections/" + url.PathEscape(name)
}

func (a Activities) actor(member int64) Actor {
	return Actor{ObjectType: "Agent", Account: Account{HomePage: a.HomePage, Name: strconv.FormatInt(member, 10)}}
}

func (a Activities) course(name string) Activity {
	return Activity{ObjectType: "Activity", ID: a.collection(name),
		Definition: &ActivityDefinition{Type: ActivityCourse, Name: map[string]string{"und": name}}}
}

// completed is the verb of every statement Playhead sends.
var completed = Verb{ID: VerbCompleted, Display: map[string]string{"en-US": "completed"}}

// VideoCompletion is what a playback.completed event and the member's playback row say about
// a finish, all that its statement is made of.
type VideoCompletion struct {
	EventID    int64
	MemberID   int64
	MediaID    int64
	Title      string
	FinishedAt time.Time
	PositionMS int64
	DurationMS int64
	// PointMS is where the media counted as finished by position: its completion point, or the
	// start of its credits when that comes first (0 when the duration is unknown).
	PointMS int64
	// Watched is the member's watched ranges of the media (playback.watched) when the
	// statement is built: NULL (not Valid) when none were recorded.
	Watched pgtype.Bits
	// Collections are the courses the media was an item of, the statement's parents.
	Collections []string
}

// VideoStatement is the ADL Video Profile's completed statement of c: the played segments and
// the progress from the watched ranges, the time from the finishing position, the length from
// the duration, the completion threshold from the completion point (the profile requires it
// whenever it is not 1). The profile's session-id names the finish; the statement id is
// StatementID.
func (a Activities) VideoStatement(c VideoCompletion) Statement {
	ranges := export.Ranges(c.Watched, c.DurationMS)
	segments := make([]string, len(ranges))
	var playedMS int64
	for i, r := range ranges {
		segments[i] = seconds(r.StartMS) + "[.]" + seconds(r.EndMS)
		playedMS += r.EndMS - r.StartMS
	}
	progress, threshold := 0.0, 1.0
	if c.DurationMS > 0 {
		progress = round3(float64(playedMS) / float64(c.DurationMS))
		threshold = round3(min(1, float64(c.PointMS)/float64(c.DurationMS)))
	}
	s := Statement{
		ID:    a.StatementID(c.EventID),
		Actor: a.actor(c.MemberID),
		Verb:  completed,
		Object: Activity{ObjectType: "Activity", ID: a.media(c.MediaID),
			Definition: &ActivityDefinition{Type: ActivityVideo, Name: map[string]string{"und": c.Title}}},
		Result: Result{Completion: true, Duration: isoDuration(playedMS), Extensions: map[string]any{
			extPlayedSegments: strings.Join(segments, "[,]"),
			extProgress:       progress,
			extTime:           round3(float64(c.PositionMS) / 1000),
		}},
		Context: Context{
			ContextActivities: &ContextActivities{Category: []Activity{{ObjectType: "Activity", ID: VideoProfile,
				Definition: &ActivityDefinition{Type: activityProfile}}}},
			Platform: platform,
			Extensions: map[string]any{
				extLength:          round3(float64(c.DurationMS) / 1000),
				extSessionID:       a.sessionID(c.EventID),
				extCompletionLimit: threshold,
			},
		},
		Timestamp: c.FinishedAt.UTC(),
	}
	for _, name := range c.Collections {
		s.Context.ContextActivities.Parent = append(s.Context.ContextActivities.Parent, a.course(name))
	}
	return s
}

// CourseCompletion is what a collection.completed event says.
type CourseCompletion struct {
	EventID     int64
	MemberID    int64
	Collection  string
	CompletedAt time.Time
}

// CourseStatement is the completed statement of a course: every item of the collection
// finished.
func (a Activities) CourseStatement(c CourseCompletion) Statement {
	return Statement{
		ID:        a.StatementID(c.EventID),
		Actor:     a.actor(c.MemberID),
		Verb:      completed,
		Object:    a.course(c.Collection),
		Result:    Result{Completion: true},
		Context:   Context{Platform: platform},
		Timestamp: c.CompletedAt.UTC(),
	}
}

// platform is the statements' context.platform.
const platform = "Playhead"

// StatementID is the id of the statement of outbox row event: a name-based (version 5) UUID
// of the activity base and the row's id, so that it is the same whenever the statement is
// built and different on another deployment (another base) whose ids count from 1 too.
func (a Activities) StatementID(event int64) string {
	return nameUUID(statementNamespace, a.Base+"#"+strconv.FormatInt(event, 10), 5)
}

// sessionID is the profile's session-id of the finish of outbox row event. The profile's
// schema wants the form of a random (version 4) UUID; it is derived like StatementID, from a
// namespace of its own, with the version-4 bits, so that it is stable and never the
// statement's id.
func (a Activities) sessionID(event int64) string {
	return nameUUID(sessionNamespace, a.Base+"#"+strconv.FormatInt(event, 10), 4)
}

// The namespaces of the name-based UUIDs (RFC 9562 section 5.5), random once.
var (
	statementNamespace = [16]byte{0x3f, 0x0b, 0x55, 0x9e, 0x52, 0x1c, 0x4b, 0x7a, 0x9d, 0x36, 0x0e, 0x61, 0xa4, 0x27, 0xc8, 0x15}
	sessionNamespace   = [16]byte{0x8a, 0x41, 0x2d, 0x07, 0xe3, 0x96, 0x4f, 0x58, 0xb2, 0x1e, 0x7c, 0x90, 0x33, 0xd5, 0x6a, 0xf4}
)

// nameUUID is the SHA-1 name-based UUID of name in namespace (RFC 9562 section 5.5), with the
// version nibble set to version and the RFC's variant.
func nameUUID(namespace [16]byte, name string, version byte) string {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | version<<4
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// seconds writes ms as seconds with three decimals, the profile's form of a time in a video.
func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

// round3 rounds x to three decimals, the profile's precision for times and shares.
func round3(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 3, 64), 64)
	return v
}

// isoDuration writes ms as an ISO 8601 duration in seconds (PT754.5S), to the hundredth: an
// LRS keeps result.duration to 0.01 s, and compares a statement sent again at that precision.
func isoDuration(ms int64) string {
	return "PT" + strconv.FormatFloat(float64(ms/10)/100, 'f', -1, 64) + "S"
}
