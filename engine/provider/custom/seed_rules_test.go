package custom_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/custom"
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

// The seed requires PhysicalResourceId: a Create answered SUCCESS without
// one fails, after a Delete (RequestId CleanupRequestID, PhysicalResourceId
// the Create's RequestId) removed what the service made. Asynchronously too.
func TestCreateWithoutPhysicalID(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprint("async=", async), func(t *testing.T) {
			var e *env
			svc := newService(t, false, func(w http.ResponseWriter, req custom.Request, n int) {
				switch {
				case req.RequestType == "Create" && async:
					if status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "", nil, false)); status != http.StatusOK {
						t.Errorf("async response: %d %s", status, code)
					}
					w.WriteHeader(http.StatusOK)
				case req.RequestType == "Create":
					answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS", "Data": map[string]any{"k": "v"}})(w, req, n)
				default:
					answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": req.PhysicalResourceID})(w, req, n)
				}
			})
			e = newEnv(t, "")
			_, err := e.prov.Create(context.Background(), createReq("req-1", thing(svc.token(), cty.EmptyObjectVal)))
			var miss *custom.MissingPhysicalIDError
			if !errors.As(err, &miss) || miss.CleanupErr != nil || !strings.Contains(err.Error(), "Custom::Thing Create: the service answered SUCCESS without a PhysicalResourceId") {
				t.Fatalf("Create error %v, want a MissingPhysicalIDError whose cleanup worked", err)
			}
			reqs := svc.requests()
			if len(reqs) != 2 {
				t.Fatalf("service got %d requests, want Create and Delete", len(reqs))
			}
			if d := reqs[1]; d.RequestType != "Delete" || d.PhysicalResourceID != "req-1" || d.RequestID != custom.CleanupRequestID("req-1") || d.RequestID == "req-1" {
				t.Errorf("cleanup request %+v, want a Delete of req-1 with its own request id", d)
			}
		})
	}
}

// A failing cleanup is part of the error: the service may still hold what
// it made.
func TestCreateWithoutPhysicalIDCleanupFails(t *testing.T) {
	svc := newService(t, false, func(w http.ResponseWriter, req custom.Request, n int) {
		if req.RequestType == "Create" {
			answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS"})(w, req, n)
			return
		}
		answerWith(http.StatusOK, map[string]any{"Status": "FAILED", "Reason": "no such record"})(w, req, n)
	})
	e := newEnv(t, "")
	_, err := e.prov.Create(context.Background(), createReq("req-1", thing(svc.token(), cty.EmptyObjectVal)))
	var fe *custom.FailedError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `the Delete sent to clean up (PhysicalResourceId "req-1") failed too`) {
		t.Fatalf("Create error %v, want the cleanup's failure in it", err)
	}
}

// Update keeps CloudFormation's leniency (the request named the physical
// id) but logs that the response broke the protocol.
func TestUpdateWithoutPhysicalIDWarns(t *testing.T) {
	svc := newService(t, false, answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS"}))
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	e := newEnv(t, "", func(o *custom.Options) { o.Log = &log })
	p := thing(svc.token(), cty.EmptyObjectVal)
	res, err := e.prov.Update(context.Background(), provider.Request{Target: target, LogicalID: "custom.dns", RequestID: "req-u", PhysicalID: "phys-1", Properties: p, OldProperties: p})
	if err != nil || res.PhysicalID != "phys-1" {
		t.Fatalf("Update: %v, id %q; want phys-1 kept", err, res.PhysicalID)
	}
	if !strings.Contains(logs.String(), `"level":"warn"`) || !strings.Contains(logs.String(), "without PhysicalResourceId") {
		t.Errorf("no warning logged: %s", logs.String())
	}
}

// An HTTP error status is a failure whatever the body says; FAILED in one
// keeps its reason.
func TestErrorStatusWithSuccessBody(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusConflict, http.StatusMovedPermanently} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			svc := newService(t, false, answerWith(status, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "p-1"}))
			e := newEnv(t, "")
			_, err := e.prov.Create(context.Background(), createReq("req-1", thing(svc.token(), cty.EmptyObjectVal)))
			want := fmt.Sprintf("answered %d %s with a SUCCESS body: an HTTP error status is a failure", status, http.StatusText(status))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Create error %v, want one containing %q", err, want)
			}
			if n := len(svc.requests()); n != 1 {
				t.Errorf("%d requests, want the Create only (no retry, no cleanup)", n)
			}
		})
	}
}

// With Options.NoAPI, an acknowledged request fails at once (the fake
// clock never advances: a wait for the timeout would hang the test), and
// a response that arrived while the service held the POST still counts.
func TestNoAPI(t *testing.T) {
	const why = "nothing listens; set --listen"
	svc := newService(t, false, ack)
	e := newEnv(t, "", func(o *custom.Options) { o.NoAPI = why })
	_, err := e.prov.Create(context.Background(), createReq("req-1", thing(svc.token(), cty.EmptyObjectVal)))
	var ue *custom.UnreachableError
	if !errors.As(err, &ue) || !strings.HasSuffix(err.Error(), "so its response would come to the ResponseURL, but "+why) {
		t.Fatalf("Create error %v, want an UnreachableError ending in the reason", err)
	}

	var early *env
	svc2 := newService(t, false, func(w http.ResponseWriter, req custom.Request, _ int) {
		cfnPut(t, early.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "p-9", nil, false))
		w.WriteHeader(http.StatusOK)
	})
	early = newEnv(t, "", func(o *custom.Options) { o.NoAPI = why })
	if res, err := early.prov.Create(context.Background(), createReq("req-2", thing(svc2.token(), cty.EmptyObjectVal))); err != nil || res.PhysicalID != "p-9" {
		t.Fatalf("Create with the response already in: %v, %q", err, res.PhysicalID)
	}
}

// response_over_https: the external URL must be https on port 443, and an
// API must be served.
func TestValidateResponseOverHTTPS(t *testing.T) {
	p := props(map[string]cty.Value{
		"type": cty.StringVal("Custom::Thing"), "service_token": cty.StringVal("https://svc.example/hook"),
		"response_over_https": cty.True,
	})
	for _, tc := range []struct{ ext, noAPI, want string }{
		{ext: "https://stackd.example"},
		{ext: "https://stackd.example:443/base"},
		{ext: "http://stackd.example", want: "external URL is http://stackd.example; set --external-url"},
		{ext: "https://stackd.example:7070", want: "only over https to port 443"},
		{ext: "https://stackd.example", noAPI: "no API; set --listen", want: "answers only at the ResponseURL, but no API; set --listen"},
	} {
		b, err := custom.NewBroker(custom.BrokerOptions{ExternalURL: tc.ext})
		if err != nil {
			t.Fatal(err)
		}
		prov, err := custom.New(custom.Options{Broker: b, NoAPI: tc.noAPI, TypeToken: func(string) (string, bool) { return "", true }})
		if err != nil {
			t.Fatal(err)
		}
		err = prov.ValidateProperties(target, p)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s (NoAPI %q): %v, want %q", tc.ext, tc.noAPI, err, tc.want)
		}
	}
}
