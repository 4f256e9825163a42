package custom_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// The seed's CallerId: the target account for SELF, the delegated admin
// the engine hands over as the Target's Caller for DELEGATED_ADMIN — on
// every request type.
func TestCallerID(t *testing.T) {
	for _, tc := range []struct{ name, caller, want string }{
		{name: "SELF", caller: "", want: "111111111111"},
		{name: "DELEGATED_ADMIN", caller: "444444444444", want: "444444444444"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, false, answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "rec-1"}))
			e := newEnv(t, "")
			tgt := target
			tgt.Caller = tc.caller
			props := thing(svc.token(), cty.EmptyObjectVal)
			ctx := context.Background()
			req := provider.Request{Target: tgt, LogicalID: "custom.dns", RequestID: "req-1", Properties: props}
			if _, err := e.prov.Create(ctx, req); err != nil {
				t.Fatalf("Create: %v", err)
			}
			req.RequestID, req.PhysicalID, req.OldProperties = "req-2", "rec-1", props
			if _, err := e.prov.Update(ctx, req); err != nil {
				t.Fatalf("Update: %v", err)
			}
			req.RequestID = "req-3"
			if err := e.prov.Delete(ctx, req); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			reqs := svc.requests()
			if len(reqs) != 3 {
				t.Fatalf("service got %d requests, want 3", len(reqs))
			}
			for _, r := range reqs {
				if r.CallerID != tc.want || r.ResourceOwnerID != "111111111111" {
					t.Errorf("%s: CallerId %q, ResourceOwnerId %q; want %q, 111111111111", r.RequestType, r.CallerID, r.ResourceOwnerID, tc.want)
				}
			}
		})
	}
}
