package api

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/state"
)

// BenchmarkEventLag measures how long a change of an operation in the
// state takes to reach an SSE client of a running hub (the default
// Interval, 500 ms): "poll" is the hub reading on its interval only,
// "wake" the hub woken by the writer (Wake, as the daemon's reconciler
// does through its event sink and progress). ns/op is the mean lag of
// changes made at a random moment of the interval (the wait before each,
// up to one Interval, is not timed).
func BenchmarkEventLag(b *testing.B) {
	for _, wake := range []bool{false, true} {
		name := "poll"
		if wake {
			name = "wake"
		}
		b.Run(name, func(b *testing.B) {
			st, err := state.Open(filepath.Join(b.TempDir(), "state"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			now := time.Now().UTC()
			ss, err := st.CreateStackSet("web", now)
			if err != nil {
				b.Fatal(err)
			}
			op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: state.KindDeployStackSet,
				Revision: strings.Repeat("b", 40), Status: state.OperationRunning, Created: now}
			if err := st.PutOperation(op); err != nil {
				b.Fatal(err)
			}
			ss.LastOperation = op.ID
			if err := st.PutStackSet(ss); err != nil {
				b.Fatal(err)
			}
			hub := NewEventHub(st, HubOptions{})
			srv, err := New(Options{Store: st, Token: testToken, Events: hub})
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				hub.Run(ctx)
			}()
			defer func() { cancel(); <-done }()
			rq, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/events", nil)
			rq.Header.Set("Authorization", "Bearer "+testToken)
			res, err := hs.Client().Do(rq)
			if err != nil {
				b.Fatal(err)
			}
			defer res.Body.Close()
			got := make(chan struct{}, 16)
			go func() {
				sc := bufio.NewScanner(res.Body)
				for sc.Scan() {
					if sc.Text() == "event: "+EventOperation {
						got <- struct{}{}
					}
				}
			}()
			// The hub's first read only takes note: wait for it with a
			// change it must publish.
			publish := func(i int) {
				op.Reason = "step " + strconv.Itoa(i)
				if err := st.PutOperation(op); err != nil {
					b.Fatal(err)
				}
				if wake {
					hub.Wake()
				}
			}
			for warm := 0; ; warm++ {
				publish(-1 - warm)
				select {
				case <-got:
				case <-time.After(2 * time.Second):
					continue
				}
				break
			}
			rnd := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				time.Sleep(time.Duration(rnd.Int64N(int64(DefaultHubInterval))))
				b.StartTimer()
				publish(i)
				select {
				case <-got:
				case <-time.After(time.Minute):
					b.Fatal("no operation event within a minute")
				}
			}
		})
	}
}
