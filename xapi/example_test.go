package xapi_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/playhead/playhead/xapi"
)

// The statement of member 7 finishing a 10-minute lesson of the course "Course A" at 9:50,
// having played its first 72 seconds and its second half.
func ExampleActivities_VideoStatement() {
	a := xapi.Activities{Base: "https://videos.example", HomePage: "https://videos.example"}
	watched := make([]byte, 13) // 100 bits, one per 1 % of the video
	for _, bucket := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11} {
		watched[bucket/8] |= 0x80 >> (bucket % 8)
	}
	for bucket := 50; bucket < 100; bucket++ {
		watched[bucket/8] |= 0x80 >> (bucket % 8)
	}
	s := a.VideoStatement(xapi.VideoCompletion{
		EventID: 41, MemberID: 7, MediaID: 12, Title: "Lesson 1",
		FinishedAt: time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC), PositionMS: 590_000, DurationMS: 600_000, PointMS: 570_000,
		Watched:     pgtype.Bits{Bytes: watched, Len: 100, Valid: true},
		Collections: []string{"Course A"},
	})
	out, _ := json.MarshalIndent(s, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "id": "82c26463-e7ff-5cc8-9c43-7ceebe8f6443",
	//   "actor": {
	//     "objectType": "Agent",
	//     "account": {
	//       "homePage": "https://videos.example",
	//       "name": "7"
	//     }
	//   },
	//   "verb": {
	//     "id": "http://adlnet.gov/expapi/verbs/completed",
	//     "display": {
	//       "en-US": "completed"
	//     }
	//   },
	//   "object": {
	//     "objectType": "Activity",
	//     "id": "https://videos.example/media/12",
	//     "definition": {
	//       "type": "https://w3id.org/xapi/video/activity-type/video",
	//       "name": {
	//         "und": "Lesson 1"
	//       }
	//     }
	//   },
	//   "result": {
	//     "completion": true,
	//     "duration": "PT372S",
	//     "extensions": {
	//       "https://w3id.org/xapi/video/extensions/played-segments": "0.000[.]72.000[,]300.000[.]600.000",
	//       "https://w3id.org/xapi/video/extensions/progress": 0.62,
	//       "https://w3id.org/xapi/video/extensions/time": 590
	//     }
	//   },
	//   "context": {
	//     "contextActivities": {
	//       "parent": [
	//         {
	//           "objectType": "Activity",
	//           "id": "https://videos.example/collections/Course%20A",
	//           "definition": {
	//             "type": "http://adlnet.gov/expapi/activities/course",
	//             "name": {
	//               "und": "Course A"
	//             }
	//           }
	//         }
	//       ],
	//       "category": [
	//         {
	//           "objectType": "Activity",
	//           "id": "https://w3id.org/xapi/video",
	//           "definition": {
	//             "type": "http://adlnet.gov/expapi/activities/profile"
	//           }
	//         }
	//       ]
	//     },
	//     "platform": "Playhead",
	//     "extensions": {
	//       "https://w3id.org/xapi/video/extensions/completion-threshold": 0.95,
	//       "https://w3id.org/xapi/video/extensions/length": 600,
	//       "https://w3id.org/xapi/video/extensions/session-id": "f4ddae03-347e-4f83-8fa0-479e4afc52c7"
	//     }
	//   },
	//   "timestamp": "2026-12-07T21:00:00Z"
	// }
}
