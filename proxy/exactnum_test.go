package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInexactNumbersRefused: a call whose arguments hold a number its call
// entry would record as another number (an integer beyond ±2^53, which
// the entry's JCS form holds as the nearest double; a number other than
// 0 that underflows to 0) is refused: nothing is written, nothing reaches
// the server. The server got the arguments as sent, every digit, while
// the entry said 12345678901234567000: the log named a call other than
// the one made. Numbers a double holds exactly, and fractions (which
// every reader takes as a double), are recorded and made as before. Both
// paths of the HTTP front: the fast path, and the SDK's (a call with a
// progress token).
func TestInexactNumbersRefused(t *testing.T) {
	r := newReapRig(t, false)
	cs := r.session(t)
	for _, path := range []struct {
		name string
		meta mcp.Meta
	}{{"Fast", nil}, {"SDK", mcp.Meta{"progressToken": "p"}}} {
		for i, tc := range []struct {
			n    string
			want string // the refusal's words; "" if the call is made
		}{
			{"12345678901234567891", "beyond ±2^53"},
			{"9007199254740993", "beyond ±2^53"},
			{"-9007199254740993", "beyond ±2^53"},
			{"1e-400", "too small"},
			{"[1,{\"deep\":98765432109876543210}]", "beyond ±2^53"},
			{"9007199254740992", ""},
			{"18014398509481984", ""}, // 2^54
			{"0.1000000000000000055511151231257827", ""},
			{"-0", ""},
			{`"12345678901234567891"`, ""},
		} {
			text := fmt.Sprintf("%s-%d", path.name, i)
			args := json.RawMessage(fmt.Sprintf(`{"text":%q,"n":%s}`, text, tc.n))
			before, appended := r.l.size(t), r.appended(t)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__append", Arguments: args, Meta: path.meta})
			if tc.want == "" {
				if err != nil || res.IsError {
					t.Errorf("%s: n %s: %v %s, want it made", path.name, tc.n, err, mustJSON(res))
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: n %s: %v %s, want a refusal saying %q", path.name, tc.n, err, mustJSON(res), tc.want)
			}
			if got := r.l.size(t); got != before {
				e := r.l.entry(t, before)
				t.Errorf("%s: n %s: the log grew by %d entries, the first %s", path.name, tc.n, got-before, e)
			}
			if got := r.appended(t); got != appended {
				t.Errorf("%s: n %s: the call was forwarded: the fixture appended %q", path.name, tc.n, strings.TrimPrefix(got, appended))
			}
		}
	}
}
