package custom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/custom"
)

var ctyCmp = cmp.Comparer(func(a, b cty.Value) bool { return a.RawEquals(b) })

func createReq(id string, properties cty.Value) provider.Request {
	return provider.Request{Target: target, LogicalID: "custom.dns", RequestID: id, Properties: properties}
}

func TestCreateSyncResponse(t *testing.T) {
	svc := newService(t, false, answerWith(http.StatusOK, map[string]any{
		"Status": "SUCCESS", "PhysicalResourceId": "rec-1", "Reason": "created",
		"Data": map[string]any{"fqdn": "web.example.", "ttl": 300, "ok": true, "ips": []any{"10.0.0.1", 2}, "meta": map[string]any{"k": "v"}, "none": nil},
	}))
	e := newEnv(t, "")
	properties := cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("web"), "replicas": cty.NumberIntVal(3)})
	res, err := e.prov.Create(context.Background(), createReq("req-1", thing(svc.token(), properties)))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := provider.Result{PhysicalID: "rec-1", Attributes: map[string]cty.Value{
		"id":     cty.StringVal("rec-1"),
		"reason": cty.StringVal("created"),
		"data": cty.ObjectVal(map[string]cty.Value{
			"fqdn": cty.StringVal("web.example."),
			"ttl":  cty.NumberIntVal(300),
			"ok":   cty.True,
			"ips":  cty.TupleVal([]cty.Value{cty.StringVal("10.0.0.1"), cty.NumberIntVal(2)}),
			"meta": cty.ObjectVal(map[string]cty.Value{"k": cty.StringVal("v")}),
			"none": cty.NullVal(cty.DynamicPseudoType),
		}),
	}}
	if diff := cmp.Diff(want, res, ctyCmp); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	reqs := svc.requests()
	if len(reqs) != 1 {
		t.Fatalf("service got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if !strings.HasPrefix(got.ResponseURL, e.respSrv.URL+"/v1/responses/") {
		t.Errorf("ResponseURL %q, want it under %s/v1/responses/", got.ResponseURL, e.respSrv.URL)
	}
	got.ResponseURL = ""
	wantReq := custom.Request{
		RequestType: "Create", ServiceToken: svc.token(), RequestID: "req-1", ResourceType: "Custom::Thing",
		LogicalResourceID: "custom.dns", StackID: stackID, StackName: "web",
		ResourceOwnerID: "111111111111", CallerID: "111111111111", RegionID: "eu-west-1",
		ResourceProperties: json.RawMessage(`{"name":"web","replicas":3}`),
	}
	if diff := cmp.Diff(wantReq, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if n := e.broker.Waiting(); n != 0 {
		t.Errorf("broker has %d waiters after the call, want 0", n)
	}
	// The request was answered synchronously: a response on the URL is late.
	if status, code := cfnPut(t, e.respSrv.Client(), reqs[0].ResponseURL, cfnBody(reqs[0], "SUCCESS", "rec-2", nil, false)); status != http.StatusConflict || code != custom.CodeAlreadyAnswered {
		t.Errorf("response after a synchronous answer: got %d %s, want 409 %s", status, code, custom.CodeAlreadyAnswered)
	}
}

func TestCreateAsyncResponse(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		contentType string
		early       bool // respond from inside the service handler, before it answers the POST
	}{
		{name: "cfn-response PUT with empty Content-Type", method: http.MethodPut, contentType: ""},
		{name: "PUT before the POST is answered", method: http.MethodPut, contentType: "", early: true},
		{name: "POST with JSON", method: http.MethodPost, contentType: "application/json"},
		{name: "PUT with an odd Content-Type", method: http.MethodPut, contentType: "text/plain; charset=utf-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e *env
			var client *http.Client
			answer := func(w http.ResponseWriter, req custom.Request, _ int) {
				if tc.early {
					body := cfnBody(req, "SUCCESS", "rec-9", map[string]any{"fqdn": "a.example."}, false)
					if status, code := deliver(t, client, tc.method, req.ResponseURL, tc.contentType, body); status != http.StatusOK {
						t.Errorf("early response: got %d %s, want 200", status, code)
					}
				}
				w.WriteHeader(http.StatusAccepted)
			}
			svc := newService(t, false, answer)
			e = newEnv(t, "")
			client = e.respSrv.Client()
			done := start(func() (provider.Result, error) {
				return e.prov.Create(context.Background(), createReq("req-1", thing(svc.token(), cty.NullVal(cty.DynamicPseudoType))))
			})
			req := recv(t, svc.reqs)
			if string(req.ResourceProperties) != "{}" {
				t.Errorf("ResourceProperties %s, want {}", req.ResourceProperties)
			}
			if !tc.early {
				body := cfnBody(req, "SUCCESS", "rec-9", map[string]any{"fqdn": "a.example."}, false)
				if status, code := deliver(t, client, tc.method, req.ResponseURL, tc.contentType, body); status != http.StatusOK {
					t.Fatalf("response: got %d %s, want 200", status, code)
				}
			}
			out := recv(t, done)
			if out.err != nil {
				t.Fatalf("Create: %v", out.err)
			}
			if out.res.PhysicalID != "rec-9" || !out.res.Attributes["data"].RawEquals(cty.ObjectVal(map[string]cty.Value{"fqdn": cty.StringVal("a.example.")})) {
				t.Errorf("got %s with data %#v, want rec-9 with fqdn", out.res.PhysicalID, out.res.Attributes["data"])
			}
			if !strings.HasPrefix(out.res.Attributes["reason"].AsString(), "See the details") {
				t.Errorf("reason %q, want cfn-response's", out.res.Attributes["reason"].AsString())
			}
		})
	}
}

func TestHTTPS(t *testing.T) {
	svc := newService(t, true, ack)
	e := newEnvWith(t, "", true, withClient(svc.srv.Client()))
	if !strings.HasPrefix(svc.token(), "https://") {
		t.Fatalf("service token %s is not https", svc.token())
	}
	done := start(func() (provider.Result, error) {
		return e.prov.Create(context.Background(), createReq("req-tls", thing(svc.token(), cty.EmptyObjectVal)))
	})
	req := recv(t, svc.reqs)
	if !strings.HasPrefix(req.ResponseURL, "https://") {
		t.Errorf("ResponseURL %s, want https", req.ResponseURL)
	}
	if status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "tls-1", nil, false)); status != http.StatusOK {
		t.Fatalf("response: %d %s", status, code)
	}
	if out := recv(t, done); out.err != nil || out.res.PhysicalID != "tls-1" {
		t.Fatalf("Create: %v, %q; want tls-1", out.err, out.res.PhysicalID)
	}
}

func TestRetry(t *testing.T) {
	tests := []struct {
		name       string
		failures   int
		status     int
		retryAfter string
		wantSleeps []time.Duration
		wantErr    string // "" for success
		wantCalls  int
	}{
		{name: "503 twice, then success", failures: 2, status: 503, wantSleeps: []time.Duration{time.Second, 2 * time.Second}, wantCalls: 3},
		{name: "429 with Retry-After", failures: 1, status: 429, retryAfter: "7", wantSleeps: []time.Duration{7 * time.Second}, wantCalls: 2},
		{name: "500 until attempts run out", failures: 99, status: 500, wantSleeps: []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, wantErr: "500 Internal Server Error (gave up after 5 attempts)", wantCalls: 5},
		{name: "400 is not retried", failures: 99, status: 400, wantErr: "answered 400 Bad Request", wantCalls: 1},
		{name: "redirects are not followed", failures: 99, status: 307, wantErr: "redirects are not followed", wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, false, func(w http.ResponseWriter, req custom.Request, n int) {
				if n <= tc.failures {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					if tc.status == 307 {
						w.Header().Set("Location", "/elsewhere")
					}
					w.WriteHeader(tc.status)
					return
				}
				answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "p-1"})(w, req, n)
			})
			var logs bytes.Buffer
			log := zerolog.New(&logs)
			e := newEnv(t, "", withClient(svc.srv.Client()), func(o *custom.Options) { o.Log = &log })
			secretProps := cty.ObjectVal(map[string]cty.Value{"password": cty.StringVal("PROP-SECRET")})
			_, err := e.prov.Create(context.Background(), createReq("req-retry", thing(svc.token(), secretProps)))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Create: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Create error %v, want one containing %q", err, tc.wantErr)
			}
			reqs := svc.requests()
			if len(reqs) != tc.wantCalls {
				t.Fatalf("service got %d requests, want %d", len(reqs), tc.wantCalls)
			}
			for i, r := range reqs {
				if r.RequestID != "req-retry" || r.ResponseURL != reqs[0].ResponseURL {
					t.Errorf("attempt %d: RequestId %q ResponseURL %q, want req-retry and the first attempt's URL", i+1, r.RequestID, r.ResponseURL)
				}
			}
			if diff := cmp.Diff(tc.wantSleeps, e.clk.Sleeps()); diff != "" {
				t.Errorf("backoff (-want +got):\n%s", diff)
			}
			if got := strings.Count(logs.String(), `"message":"custom resource request failed, retrying"`); got != len(tc.wantSleeps) {
				t.Errorf("%d retry log lines, want %d:\n%s", got, len(tc.wantSleeps), logs.String())
			}
			if strings.Contains(logs.String(), "PROP-SECRET") || (err != nil && strings.Contains(err.Error(), "PROP-SECRET")) {
				t.Errorf("a property value was logged or put into the error")
			}
		})
	}
}

func TestRetryConnectionRefused(t *testing.T) {
	// A port nobody listens on: the first two attempts are refused; the
	// service comes up during the second backoff.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var (
		mu  sync.Mutex
		ids []string
	)
	svc := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req custom.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		ids = append(ids, req.RequestID)
		mu.Unlock()
		answerWith(http.StatusOK, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "up-1"})(w, req, 1)
	}))
	t.Cleanup(svc.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	e := newEnv(t, "", withClient(&http.Client{Transport: tr}))
	e.clk.onSleep = func(n int) {
		if n != 2 {
			return
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		svc.Listener.Close()
		svc.Listener = l
		svc.Start()
	}
	res, err := e.prov.Create(context.Background(), createReq("req-refused", thing("http://"+addr+"/hook", cty.EmptyObjectVal)))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if res.PhysicalID != "up-1" {
		t.Errorf("physical id %q, want up-1", res.PhysicalID)
	}
	if diff := cmp.Diff([]string{"req-refused"}, ids); diff != "" {
		t.Errorf("request ids seen by the service (-want +got):\n%s", diff)
	}
	if got := len(e.clk.Sleeps()); got != 2 {
		t.Errorf("%d backoffs, want 2", got)
	}
}

func TestRetryGivesUpOnConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	e := newEnv(t, "", withClient(&http.Client{Transport: tr}))
	_, err = e.prov.Create(context.Background(), createReq("r", thing("http://"+addr+"/hook?key=SECRET-KEY", cty.EmptyObjectVal)))
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "gave up after 5 attempts") {
		t.Fatalf("Create error %v, want connection refused after 5 attempts", err)
	}
	if strings.Contains(err.Error(), "SECRET-KEY") || strings.Contains(err.Error(), "/hook") {
		t.Errorf("error %q quotes the service token's path or query", err)
	}
	if e.broker.Waiting() != 0 {
		t.Errorf("waiter left behind")
	}
}

func TestTimeout(t *testing.T) {
	svc := newService(t, false, ack)
	e := newEnv(t, "")
	done := start(func() (provider.Result, error) {
		return e.prov.Create(context.Background(), createReq("req-slow", thing(svc.token(), cty.EmptyObjectVal)))
	})
	req := recv(t, svc.reqs)
	e.clk.Advance(5*time.Minute - time.Second)
	pending(t, done)
	if e.broker.Waiting() != 1 {
		t.Fatalf("broker has %d waiters before the timeout, want 1", e.broker.Waiting())
	}
	e.clk.Advance(time.Second)
	out := recv(t, done)
	var te *custom.TimeoutError
	if !errors.As(out.err, &te) || !strings.Contains(out.err.Error(), "no response within 5m0s") {
		t.Fatalf("Create error %v, want a TimeoutError naming 5m0s", out.err)
	}
	if e.broker.Waiting() != 0 {
		t.Errorf("waiter left behind after the timeout")
	}
	status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "late", nil, false))
	if status != http.StatusGone {
		t.Errorf("late response: got %d %s, want 410", status, code)
	}
}

func TestTimeoutProperty(t *testing.T) {
	svc := newService(t, false, ack)
	e := newEnv(t, "")
	p := thing(svc.token(), cty.EmptyObjectVal)
	p = props(map[string]cty.Value{"type": p.GetAttr("type"), "service_token": p.GetAttr("service_token"), "timeout": cty.StringVal("10m")})
	done := start(func() (provider.Result, error) { return e.prov.Create(context.Background(), createReq("req-10m", p)) })
	req := recv(t, svc.reqs)
	e.clk.Advance(9 * time.Minute)
	pending(t, done)
	if status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "x", nil, false)); status != http.StatusOK {
		t.Fatalf("response after 9m: got %d %s, want 200", status, code)
	}
	if out := recv(t, done); out.err != nil {
		t.Fatalf("Create: %v", out.err)
	}
}

func TestCancelledContext(t *testing.T) {
	svc := newService(t, false, ack)
	e := newEnv(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := start(func() (provider.Result, error) {
		return e.prov.Create(ctx, createReq("req-cancel", thing(svc.token(), cty.EmptyObjectVal)))
	})
	req := recv(t, svc.reqs)
	cancel()
	if out := recv(t, done); !errors.Is(out.err, context.Canceled) {
		t.Fatalf("Create error %v, want context.Canceled", out.err)
	}
	if e.broker.Waiting() != 0 {
		t.Errorf("waiter left behind after cancel")
	}
	if status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "x", nil, false)); status != http.StatusGone || code != custom.CodeNoLongerAwaited {
		t.Errorf("response after cancel: got %d %s, want 410 %s", status, code, custom.CodeNoLongerAwaited)
	}
}

func TestDeliverRefusals(t *testing.T) {
	svc := newService(t, false, ack)
	e := newEnv(t, "")
	done := start(func() (provider.Result, error) {
		return e.prov.Create(context.Background(), createReq("req-r", thing(svc.token(), cty.EmptyObjectVal)))
	})
	req := recv(t, svc.reqs)
	client := e.respSrv.Client()
	token := strings.TrimPrefix(req.ResponseURL, e.respSrv.URL+custom.ResponsesPath)
	payload, mac, _ := strings.Cut(token, ".")

	other, err := custom.NewBroker(custom.BrokerOptions{Key: []byte("another key, 32 bytes long......"), ExternalURL: e.respSrv.URL, Now: e.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	w, err := other.Expect(custom.Identity{RequestID: "req-r", StackID: stackID, LogicalResourceID: "custom.dns"}, epoch.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	foreign := w.URL()
	w.Close()

	good := func(mod func(m map[string]any)) []byte {
		m := respFor(req, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "ok-1"})
		if mod != nil {
			mod(m)
		}
		b, _ := json.Marshal(m)
		return b
	}
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)/2] == 'A' {
			b[len(b)/2] = 'B'
		} else {
			b[len(b)/2] = 'A'
		}
		return string(b)
	}
	tests := []struct {
		name       string
		url        string
		body       []byte
		wantStatus int
		wantCode   string
	}{
		{"body of 4,097 bytes", req.ResponseURL, good(func(m map[string]any) {
			m["Reason"] = ""
			b, _ := json.Marshal(m)
			m["Reason"] = strings.Repeat("x", custom.MaxResponseBytes+1-len(b))
		}), 413, custom.CodeTooLarge},
		{"not JSON", req.ResponseURL, []byte(`Status=SUCCESS`), 400, custom.CodeMalformed},
		{"a JSON array", req.ResponseURL, []byte(`[{"Status":"SUCCESS"}]`), 400, custom.CodeMalformed},
		{"empty body", req.ResponseURL, nil, 400, custom.CodeMalformed},
		{"Data not an object", req.ResponseURL, good(func(m map[string]any) { m["Data"] = []any{1} }), 400, custom.CodeMalformed},
		{"NoEcho not a boolean", req.ResponseURL, good(func(m map[string]any) { m["NoEcho"] = "maybe" }), 400, custom.CodeMalformed},
		{"PhysicalResourceId a number", req.ResponseURL, good(func(m map[string]any) { m["PhysicalResourceId"] = 7 }), 400, custom.CodeMalformed},
		{"Status IN_PROGRESS", req.ResponseURL, good(func(m map[string]any) { m["Status"] = "IN_PROGRESS" }), 400, custom.CodeInvalidStatus},
		{"Status lower case", req.ResponseURL, good(func(m map[string]any) { m["Status"] = "success" }), 400, custom.CodeInvalidStatus},
		{"no Status", req.ResponseURL, good(func(m map[string]any) { delete(m, "Status") }), 400, custom.CodeInvalidStatus},
		{"wrong RequestId", req.ResponseURL, good(func(m map[string]any) { m["RequestId"] = "req-other" }), 400, custom.CodeMismatch},
		{"no RequestId", req.ResponseURL, good(func(m map[string]any) { delete(m, "RequestId") }), 400, custom.CodeMismatch},
		{"wrong StackId", req.ResponseURL, good(func(m map[string]any) { m["StackId"] = "other/eu-west-1/111111111111" }), 400, custom.CodeMismatch},
		{"wrong LogicalResourceId", req.ResponseURL, good(func(m map[string]any) { m["LogicalResourceId"] = "custom.other" }), 400, custom.CodeMismatch},
		{"tampered signature", e.respSrv.URL + custom.ResponsesPath + payload + "." + flip(mac), good(nil), 401, custom.CodeInvalidSignature},
		{"tampered payload", e.respSrv.URL + custom.ResponsesPath + flip(payload) + "." + mac, good(nil), 401, custom.CodeInvalidSignature},
		{"signed with another key", foreign, good(nil), 401, custom.CodeInvalidSignature},
		{"not a token", e.respSrv.URL + custom.ResponsesPath + "not-a-token", good(nil), 404, custom.CodeUnknownToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, code := cfnPut(t, client, tc.url, tc.body)
			if status != tc.wantStatus || code != tc.wantCode {
				t.Errorf("got %d %s, want %d %s", status, code, tc.wantStatus, tc.wantCode)
			}
			pending(t, done)
			if e.broker.Waiting() != 1 {
				t.Errorf("broker has %d waiters, want 1", e.broker.Waiting())
			}
		})
	}

	// The waiting call still takes a valid response, exactly 4,096 bytes.
	body := good(func(m map[string]any) {
		m["Reason"] = ""
		b, _ := json.Marshal(m)
		m["Reason"] = strings.Repeat("y", custom.MaxResponseBytes-len(b))
	})
	if len(body) != custom.MaxResponseBytes {
		t.Fatalf("test body has %d bytes", len(body))
	}
	if status, code := cfnPut(t, client, req.ResponseURL, body); status != http.StatusOK {
		t.Fatalf("valid response: got %d %s, want 200", status, code)
	}
	out := recv(t, done)
	if out.err != nil || out.res.PhysicalID != "ok-1" {
		t.Fatalf("Create: %v %q, want ok-1", out.err, out.res.PhysicalID)
	}
	if status, code := cfnPut(t, client, req.ResponseURL, good(nil)); status != http.StatusConflict || code != custom.CodeAlreadyAnswered {
		t.Errorf("second response: got %d %s, want 409 %s", status, code, custom.CodeAlreadyAnswered)
	}
}

func TestSyncAnswers(t *testing.T) {
	tests := []struct {
		name    string
		answer  func(http.ResponseWriter, custom.Request, int)
		wantErr string
		wantID  string
	}{
		{
			name:   "answer without ids is accepted",
			answer: answerWith(200, map[string]any{"Status": "SUCCESS", "RequestId": nil, "StackId": nil, "LogicalResourceId": nil, "PhysicalResourceId": "s-1"}),
			wantID: "s-1",
		},
		{
			name:    "no PhysicalResourceId: failed, the seed requires one",
			answer:  answerWith(200, map[string]any{"Status": "SUCCESS"}),
			wantErr: "Custom::Thing Create: the service answered SUCCESS without a PhysicalResourceId",
		},
		{
			name:    "SUCCESS body in a 400",
			answer:  answerWith(400, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "s-1"}),
			wantErr: "answered 400 Bad Request with a SUCCESS body: an HTTP error status is a failure",
		},
		{
			name:    "FAILED in a 400",
			answer:  answerWith(400, map[string]any{"Status": "FAILED", "Reason": "zone not found"}),
			wantErr: "Custom::Thing Create: the service answered FAILED: zone not found",
		},
		{
			name:    "answer for another request",
			answer:  answerWith(200, map[string]any{"Status": "SUCCESS", "RequestId": "req-x"}),
			wantErr: "RequestId is missing or does not match",
		},
		{
			name:    "bad status",
			answer:  answerWith(200, map[string]any{"Status": "DONE"}),
			wantErr: "Status must be",
		},
		{
			name: "oversized body",
			answer: func(w http.ResponseWriter, req custom.Request, _ int) {
				_, _ = w.Write([]byte(strings.Repeat(" ", custom.MaxResponseBytes+1)))
			},
			wantErr: "more than 4096 bytes",
		},
		{
			name: "JSON object without Status waits for the URL",
			answer: func(w http.ResponseWriter, req custom.Request, _ int) {
				_, _ = w.Write([]byte(`{"status":"accepted"}`))
			},
			wantErr: "no response within",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, false, tc.answer)
			e := newEnv(t, "")
			done := start(func() (provider.Result, error) {
				return e.prov.Create(context.Background(), createReq("req-s", thing(svc.token(), cty.EmptyObjectVal)))
			})
			if tc.wantErr == "no response within" {
				recv(t, svc.reqs)
				e.clk.Advance(5 * time.Minute)
			}
			out := recv(t, done)
			if tc.wantErr != "" {
				if out.err == nil || !strings.Contains(out.err.Error(), tc.wantErr) {
					t.Fatalf("Create error %v, want one containing %q", out.err, tc.wantErr)
				}
				return
			}
			if out.err != nil || out.res.PhysicalID != tc.wantID {
				t.Fatalf("Create: %v, id %q; want %q", out.err, out.res.PhysicalID, tc.wantID)
			}
		})
	}
}

func TestStringifyProperties(t *testing.T) {
	properties := cty.ObjectVal(map[string]cty.Value{
		"s":    cty.StringVal("a<b>&c"),
		"n":    cty.NumberIntVal(3),
		"f":    cty.MustParseNumberVal("0.1"),
		"big":  cty.MustParseNumberVal("12345678901234567890123"),
		"b":    cty.True,
		"null": cty.NullVal(cty.String),
		"list": cty.ListVal([]cty.Value{cty.NumberIntVal(1), cty.NumberIntVal(2)}),
		"tup":  cty.TupleVal([]cty.Value{cty.StringVal("x"), cty.False, cty.NumberFloatVal(1.5)}),
		"map":  cty.MapVal(map[string]cty.Value{"k": cty.NumberIntVal(-4)}),
		"obj":  cty.ObjectVal(map[string]cty.Value{"deep": cty.SetVal([]cty.Value{cty.True})}),
	})
	tests := []struct {
		name      string
		stringify cty.Value
		want      string
	}{
		{"natural JSON", cty.NullVal(cty.Bool),
			`{"b":true,"big":12345678901234567890123,"f":0.1,"list":[1,2],"map":{"k":-4},"n":3,"null":null,"obj":{"deep":[true]},"s":"a<b>&c","tup":["x",false,1.5]}`},
		{"stringify_properties = true", cty.True,
			`{"b":"true","big":"12345678901234567890123","f":"0.1","list":["1","2"],"map":{"k":"-4"},"n":"3","null":null,"obj":{"deep":["true"]},"s":"a<b>&c","tup":["x","false","1.5"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, false, answerWith(200, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "j-1"}))
			e := newEnv(t, "")
			p := props(map[string]cty.Value{
				"type": cty.StringVal("Custom::Thing"), "service_token": cty.StringVal(svc.token()),
				"properties": properties, "stringify_properties": tc.stringify,
			})
			if _, err := e.prov.Create(context.Background(), createReq("req-j", p)); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if got := string(svc.requests()[0].ResourceProperties); got != tc.want {
				t.Errorf("ResourceProperties\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestNoEcho(t *testing.T) {
	for _, noEcho := range []bool{false, true} {
		svc := newService(t, false, ack)
		e := newEnv(t, "")
		done := start(func() (provider.Result, error) {
			return e.prov.Create(context.Background(), createReq("req-n", thing(svc.token(), cty.EmptyObjectVal)))
		})
		req := recv(t, svc.reqs)
		if status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "n-1", map[string]any{"password": "s3cret"}, noEcho)); status != 200 {
			t.Fatalf("response: %d %s", status, code)
		}
		out := recv(t, done)
		if out.err != nil {
			t.Fatalf("Create: %v", out.err)
		}
		var want []string
		if noEcho {
			want = []string{"data"}
		}
		if diff := cmp.Diff(want, out.res.SensitiveAttributes); diff != "" {
			t.Errorf("NoEcho %t: sensitive attributes (-want +got):\n%s", noEcho, diff)
		}
	}
}

func TestUpdate(t *testing.T) {
	oldProps := thing("", cty.ObjectVal(map[string]cty.Value{"size": cty.NumberIntVal(1)}))
	newPropsFor := func(token string) cty.Value {
		return thing(token, cty.ObjectVal(map[string]cty.Value{"size": cty.NumberIntVal(2)}))
	}
	tests := []struct {
		name        string
		newID       any // PhysicalResourceId the Update answers; nil: none
		deleteFails bool
		wantID      string
		wantDelete  bool
		wantErr     string
	}{
		{name: "same physical id", newID: "phys-old", wantID: "phys-old"},
		{name: "no physical id keeps the old one", newID: nil, wantID: "phys-old"},
		{name: "new physical id deletes the old one", newID: "phys-new", wantID: "phys-new", wantDelete: true},
		{name: "failed cleanup is an error", newID: "phys-new", deleteFails: true, wantID: "phys-new", wantDelete: true, wantErr: `replaced "phys-old" by "phys-new", but the delete of the old physical id failed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, false, func(w http.ResponseWriter, req custom.Request, n int) {
				switch {
				case req.RequestType == "Update":
					answerWith(200, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": tc.newID, "Data": map[string]any{"v": 2}})(w, req, n)
				case tc.deleteFails:
					answerWith(200, map[string]any{"Status": "FAILED", "Reason": "in use"})(w, req, n)
				default:
					answerWith(200, map[string]any{"Status": "SUCCESS"})(w, req, n)
				}
			})
			e := newEnv(t, "")
			old := thing(svc.token(), oldProps.GetAttr("properties"))
			res, err := e.prov.Update(context.Background(), provider.Request{
				Target: target, LogicalID: "custom.dns", RequestID: "req-u", PhysicalID: "phys-old",
				Properties: newPropsFor(svc.token()), OldProperties: old,
			})
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Update: %v", err)
			}
			if tc.wantErr != "" {
				var ce *provider.SupersededError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "in use") {
					t.Fatalf("Update error %v, want a SupersededError containing %q and the reason", err, tc.wantErr)
				}
			}
			if res.PhysicalID != tc.wantID || !res.Attributes["id"].RawEquals(cty.StringVal(tc.wantID)) {
				t.Errorf("physical id %q (attribute %#v), want %q", res.PhysicalID, res.Attributes["id"], tc.wantID)
			}
			reqs := svc.requests()
			up := reqs[0]
			if up.RequestType != "Update" || up.RequestID != "req-u" || up.PhysicalResourceID != "phys-old" ||
				string(up.ResourceProperties) != `{"size":2}` || string(up.OldResourceProperties) != `{"size":1}` {
				t.Errorf("update request %+v", up)
			}
			if !tc.wantDelete {
				if len(reqs) != 1 {
					t.Errorf("service got %d requests, want only the Update", len(reqs))
				}
				return
			}
			if len(reqs) != 2 {
				t.Fatalf("service got %d requests, want Update and Delete", len(reqs))
			}
			del := reqs[1]
			if del.RequestType != "Delete" || del.PhysicalResourceID != "phys-old" || del.RequestID != custom.DeleteOldRequestID("req-u") ||
				string(del.ResourceProperties) != `{"size":1}` || del.OldResourceProperties != nil {
				t.Errorf("cleanup request %+v", del)
			}
			again := custom.DeleteOldRequestID("req-u")
			if del.RequestID == "req-u" || again != del.RequestID {
				t.Errorf("cleanup request id %q must differ from the update's and be deterministic", del.RequestID)
			}
		})
	}
}

func TestDeleteAfterFailedCreate(t *testing.T) {
	svc := newService(t, false, func(w http.ResponseWriter, req custom.Request, n int) {
		if req.RequestType == "Create" {
			answerWith(200, map[string]any{"Status": "FAILED", "Reason": "quota exceeded"})(w, req, n)
			return
		}
		answerWith(200, map[string]any{"Status": "SUCCESS"})(w, req, n)
	})
	e := newEnv(t, "")
	p := thing(svc.token(), cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("b")}))
	_, err := e.prov.Create(context.Background(), createReq("req-c", p))
	var fe *custom.FailedError
	if !errors.As(err, &fe) || fe.Reason != "quota exceeded" || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("Create error %v, want a FailedError with the reason", err)
	}
	if err := e.prov.Delete(context.Background(), provider.Request{Target: target, LogicalID: "custom.dns", RequestID: "req-c", Properties: p}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	del := svc.requests()[1]
	if del.RequestType != "Delete" || del.PhysicalResourceID != "req-c" || string(del.ResourceProperties) != `{"a":"b"}` {
		t.Errorf("delete request %+v, want PhysicalResourceId req-c", del)
	}
}

func TestDeleteFailed(t *testing.T) {
	svc := newService(t, false, answerWith(200, map[string]any{"Status": "FAILED", "Reason": "still attached"}))
	e := newEnv(t, "")
	err := e.prov.Delete(context.Background(), provider.Request{Target: target, LogicalID: "custom.dns", RequestID: "req-d", PhysicalID: "p", Properties: thing(svc.token(), cty.EmptyObjectVal)})
	if err == nil || !strings.Contains(err.Error(), "still attached") {
		t.Fatalf("Delete error %v, want the reason", err)
	}
}

func TestDefaultServiceToken(t *testing.T) {
	svc := newService(t, false, answerWith(200, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "d-1"}))
	e := newEnv(t, svc.token())
	p := props(map[string]cty.Value{"type": cty.StringVal("Custom::DNSRecord")})
	if _, err := e.prov.Create(context.Background(), createReq("req-def", p)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := svc.requests()[0]; got.ServiceToken != svc.token() || got.ResourceType != "Custom::DNSRecord" {
		t.Errorf("request went with token %q type %q", got.ServiceToken, got.ResourceType)
	}
	// A type unregistered since still gets its Delete through its own token.
	e.mu.Lock()
	delete(e.registry, "Custom::DNSRecord")
	e.mu.Unlock()
	p = props(map[string]cty.Value{"type": cty.StringVal("Custom::DNSRecord"), "service_token": cty.StringVal(svc.token())})
	if err := e.prov.Delete(context.Background(), provider.Request{Target: target, LogicalID: "custom.dns", RequestID: "req-del", PhysicalID: "d-1", Properties: p}); err != nil {
		t.Fatalf("Delete of an unregistered type: %v", err)
	}
	if _, err := e.prov.Create(context.Background(), createReq("req-again", p)); err == nil || !strings.Contains(err.Error(), "not a registered resource type") {
		t.Fatalf("Create of an unregistered type: %v", err)
	}
}

func TestValidateProperties(t *testing.T) {
	e := newEnv(t, "https://dns.internal/hook")
	e.mu.Lock()
	e.registry["Custom::BadDefault"] = "ftp://nope"
	e.mu.Unlock()
	secret := cty.ObjectVal(map[string]cty.Value{"password": cty.StringVal("hunter2")})
	with := func(set map[string]cty.Value) cty.Value {
		m := map[string]cty.Value{"type": cty.StringVal("Custom::Thing"), "service_token": cty.StringVal("https://x.internal/hook"), "properties": secret}
		for k, v := range set {
			m[k] = v
		}
		return props(m)
	}
	tests := []struct {
		name  string
		props cty.Value
		want  []string // substrings of the error; none: valid
	}{
		{name: "valid", props: with(nil)},
		{name: "default token", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::DNSRecord"), "service_token": cty.NullVal(cty.String)})},
		{name: "http token", props: with(map[string]cty.Value{"service_token": cty.StringVal("http://127.0.0.1:8080/")})},
		{name: "timeout bounds", props: with(map[string]cty.Value{"timeout": cty.StringVal("1s")})},
		{name: "timeout 12h", props: with(map[string]cty.Value{"timeout": cty.StringVal("12h")})},
		{name: "unknown values are skipped", props: with(map[string]cty.Value{"type": cty.UnknownVal(cty.String), "service_token": cty.UnknownVal(cty.String), "timeout": cty.UnknownVal(cty.String), "properties": cty.DynamicVal})},
		{name: "properties may be a map", props: with(map[string]cty.Value{"properties": cty.MapVal(map[string]cty.Value{"a": cty.StringVal("b")})})},
		{name: "unregistered type", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::Nope")}), want: []string{"Custom::Nope is not a registered resource type"}},
		{name: "not Custom::", props: with(map[string]cty.Value{"type": cty.StringVal("AWS::S3::Bucket")}), want: []string{`"AWS::S3::Bucket" must match Custom::`}},
		{name: "digit first", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::1x")}), want: []string{"must match"}},
		{name: "dash", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::a-b")}), want: []string{"must match"}},
		{name: "256 characters", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::" + strings.Repeat("a", 248))}), want: []string{"at most 255 characters"}},
		{name: "no type", props: with(map[string]cty.Value{"type": cty.NullVal(cty.String)}), want: []string{"type: required"}},
		{name: "missing token", props: with(map[string]cty.Value{"service_token": cty.NullVal(cty.String)}), want: []string{"service_token: required, because resource type Custom::Thing has no default service token"}},
		{name: "ftp token", props: with(map[string]cty.Value{"service_token": cty.StringVal("ftp://x.internal/?key=SECRET")}), want: []string{"service_token: must be an http:// or https:// URL"}},
		{name: "relative token", props: with(map[string]cty.Value{"service_token": cty.StringVal("/hook")}), want: []string{"service_token: must be"}},
		{name: "bad default token", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::BadDefault"), "service_token": cty.NullVal(cty.String)}), want: []string{"default service token of Custom::BadDefault"}},
		{name: "timeout too short", props: with(map[string]cty.Value{"timeout": cty.StringVal("500ms")}), want: []string{"timeout: 500ms is outside 1s to 12h0m0s"}},
		{name: "timeout too long", props: with(map[string]cty.Value{"timeout": cty.StringVal("12h1s")}), want: []string{"timeout: 12h0m1s is outside"}},
		{name: "timeout not a duration", props: with(map[string]cty.Value{"timeout": cty.StringVal("soon")}), want: []string{"timeout: must be a duration"}},
		{name: "properties not an object", props: with(map[string]cty.Value{"properties": cty.StringVal("hunter2")}), want: []string{"properties: must be an object"}},
		{name: "all at once", props: with(map[string]cty.Value{"type": cty.StringVal("Custom::Nope"), "service_token": cty.StringVal("mailto:x"), "timeout": cty.StringVal("0s")}),
			want: []string{"not a registered", "service_token: must be", "timeout: 0s is outside"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.prov.ValidateProperties(target, tc.props)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q quotes a property value", err)
			}
		})
	}
}

func TestValidateUnregisteredTypeOnce(t *testing.T) {
	e := newEnv(t, "")
	err := e.prov.ValidateProperties(target, props(map[string]cty.Value{"type": cty.StringVal("Custom::Nope")}))
	if err == nil || !strings.Contains(err.Error(), "not a registered resource type") || strings.Contains(err.Error(), "default service token") {
		t.Errorf("got %v, want only the registration error", err)
	}
}

func TestSchema(t *testing.T) {
	e := newEnv(t, "")
	s := e.prov.Schema()
	want := map[string]provider.Recreation{"type": provider.Always, "service_token": provider.Always, "properties": provider.Conditionally, "timeout": provider.Never, "stringify_properties": provider.Never, "response_over_https": provider.Never}
	for name, rec := range want {
		if got := s.Properties[name].Recreation; got != rec {
			t.Errorf("%s: recreation %s, want %s", name, got, rec)
		}
	}
	if len(s.Properties) != len(want) || !s.Properties["type"].Required || !s.OpenAttributes || s.Properties["properties"].Type != cty.DynamicPseudoType {
		t.Errorf("schema %+v", s)
	}
	if diff := cmp.Diff([]string{"id", "data", "reason"}, s.Attributes); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestErrorsDoNotQuoteValues(t *testing.T) {
	svc := newService(t, false, func(w http.ResponseWriter, req custom.Request, n int) {
		answerWith(200, map[string]any{"Status": "FAILED", "Reason": "nope", "Data": map[string]any{"token": "DATA-SECRET"}})(w, req, n)
	})
	e := newEnv(t, "")
	p := thing(svc.token(), cty.ObjectVal(map[string]cty.Value{"password": cty.StringVal("PROP-SECRET")}))
	_, err := e.prov.Create(context.Background(), createReq("req-leak", p))
	if err == nil {
		t.Fatal("Create succeeded, want FAILED")
	}
	for _, s := range []string{"PROP-SECRET", "DATA-SECRET"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q quotes %s", err, s)
		}
	}
	unknown := thing(svc.token(), cty.ObjectVal(map[string]cty.Value{"password": cty.UnknownVal(cty.String)}))
	if _, err := e.prov.Create(context.Background(), createReq("req-unknown", unknown)); err == nil || !strings.Contains(err.Error(), "must be known before apply") {
		t.Errorf("Create with unknown properties: %v", err)
	}
}

func TestConcurrentCreates(t *testing.T) {
	svc := newService(t, false, ack)
	e := newEnv(t, "")
	const n = 16
	dones := make([]<-chan outcome, n)
	for i := range n {
		id := "req-" + string(rune('a'+i))
		dones[i] = start(func() (provider.Result, error) {
			r := createReq(id, thing(svc.token(), cty.EmptyObjectVal))
			r.LogicalID = "custom.dns[" + id + "]"
			return e.prov.Create(context.Background(), r)
		})
	}
	var wg sync.WaitGroup
	for range n {
		req := recv(t, svc.reqs)
		wg.Go(func() {
			if status, code := cfnPut(t, e.respSrv.Client(), req.ResponseURL, cfnBody(req, "SUCCESS", "phys-"+req.RequestID, nil, false)); status != 200 {
				t.Errorf("%s: response %d %s", req.RequestID, status, code)
			}
		})
	}
	wg.Wait()
	for i, d := range dones {
		out := recv(t, d)
		want := "phys-req-" + string(rune('a'+i))
		if out.err != nil || out.res.PhysicalID != want {
			t.Errorf("call %d: %v %q, want %q", i, out.err, out.res.PhysicalID, want)
		}
	}
	if e.broker.Waiting() != 0 {
		t.Errorf("%d waiters left", e.broker.Waiting())
	}
}

func TestNewOptions(t *testing.T) {
	b, err := custom.NewBroker(custom.BrokerOptions{ExternalURL: "http://127.0.0.1:7070"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts custom.Options
		want string
	}{
		{"no broker", custom.Options{}, "broker is required"},
		{"default above max", custom.Options{Broker: b, DefaultTimeout: time.Hour, MaxTimeout: time.Minute}, "default timeout"},
		{"defaults", custom.Options{Broker: b}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := custom.New(tc.opts)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("New: %v, want %q", err, tc.want)
			}
		})
	}
}
