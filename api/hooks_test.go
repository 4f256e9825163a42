package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestGitHook(t *testing.T) {
	const body = `{"ref":"refs/heads/main","after":"1a2b3c"}`
	tests := []struct {
		name        string
		body        string
		signature   string // "" : none
		event       string
		eventHeader string
		want        int
		wantTrigger int32
		wantStatus  string
	}{
		{name: "push", body: body, signature: sign("hook-secret", body), event: "push", want: http.StatusAccepted, wantTrigger: 1, wantStatus: "fetch scheduled"},
		{name: "no event header", body: body, signature: sign("hook-secret", body), want: http.StatusAccepted, wantTrigger: 1, wantStatus: "fetch scheduled"},
		{name: "gitea push", body: body, signature: sign("hook-secret", body), event: "push", eventHeader: "X-Gitea-Event", want: http.StatusAccepted, wantTrigger: 1, wantStatus: "fetch scheduled"},
		{name: "branch created", body: body, signature: sign("hook-secret", body), event: "create", want: http.StatusAccepted, wantTrigger: 1, wantStatus: "fetch scheduled"},
		{name: "ping", body: `{"zen":"Keep it logically awesome."}`, signature: sign("hook-secret", `{"zen":"Keep it logically awesome."}`), event: "ping", want: http.StatusOK, wantStatus: "pong"},
		{name: "other event", body: body, signature: sign("hook-secret", body), event: "issues", want: http.StatusOK, wantStatus: "ignored"},
		{name: "missing signature", body: body, event: "push", want: http.StatusUnauthorized},
		{name: "wrong secret", body: body, signature: sign("other", body), event: "push", want: http.StatusUnauthorized},
		{name: "other body", body: body, signature: sign("hook-secret", body+" "), event: "push", want: http.StatusUnauthorized},
		{name: "sha1 prefix", body: body, signature: strings.Replace(sign("hook-secret", body), "sha256=", "sha1=", 1), event: "push", want: http.StatusUnauthorized},
		{name: "not hex", body: body, signature: "sha256=zz", event: "push", want: http.StatusUnauthorized},
		{name: "truncated", body: body, signature: sign("hook-secret", body)[:20], event: "push", want: http.StatusUnauthorized},
		{name: "unsigned ping", body: "{}", event: "ping", want: http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			h := map[string]string{"Content-Type": "application/json"}
			if tc.signature != "" {
				h[SignatureHeader] = tc.signature
			}
			if tc.event != "" {
				h[cmpOr(tc.eventHeader, "X-GitHub-Event")] = tc.event
			}
			// The webhook authenticates by its signature, not the token.
			r := e.do(req{method: http.MethodPost, path: "/v1/hooks/git", body: tc.body, header: h, noAuth: true})
			r.wantStatus(t, "POST", tc.want)
			if got := e.triggers.Load(); got != tc.wantTrigger {
				t.Errorf("triggers = %d, want %d", got, tc.wantTrigger)
			}
			if tc.want == http.StatusUnauthorized {
				if got := r.apiErr(t).Code; got != CodeUnauthorized {
					t.Errorf("code = %q, want %q", got, CodeUnauthorized)
				}
				if got := r.header.Get("WWW-Authenticate"); got != SignatureHeader {
					t.Errorf("WWW-Authenticate = %q, want %q", got, SignatureHeader)
				}
				return
			}
			var ack map[string]string
			r.decode(t, &ack)
			if ack["status"] != tc.wantStatus {
				t.Errorf("status = %q, want %q", ack["status"], tc.wantStatus)
			}
		})
	}
}

func TestGitHookBodyLimit(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.HookLimits.MaxBodyBytes = 4096 })
	body := strings.Repeat("x", 4097)
	r := e.do(req{method: http.MethodPost, path: "/v1/hooks/git", body: body, noAuth: true,
		header: map[string]string{SignatureHeader: sign("hook-secret", body), "X-GitHub-Event": "push"}})
	r.wantStatus(t, "oversized push", http.StatusRequestEntityTooLarge)
	if got := r.apiErr(t).Code; got != CodeTooLarge {
		t.Errorf("code = %q, want %q", got, CodeTooLarge)
	}
	if got := e.triggers.Load(); got != 0 {
		t.Errorf("triggers = %d, want 0", got)
	}
}

func TestGitHookNotConfigured(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.WebhookSecret = "" })
	r := e.do(req{method: http.MethodPost, path: "/v1/hooks/git", body: "{}", noAuth: true,
		header: map[string]string{SignatureHeader: sign("", "{}")}})
	r.wantStatus(t, "no secret", http.StatusNotFound)
	if got := r.apiErr(t).Code; got != CodeNotConfigured {
		t.Errorf("code = %q, want %q", got, CodeNotConfigured)
	}
	if got := e.triggers.Load(); got != 0 {
		t.Errorf("triggers = %d, want 0", got)
	}
}

// httpStatusOnly has an HTTP status but no code.
type httpStatusOnly struct{ status int }

func (e httpStatusOnly) Error() string   { return fmt.Sprintf("refused with %d", e.status) }
func (e httpStatusOnly) HTTPStatus() int { return e.status }

func TestResponses(t *testing.T) {
	const cfnBody = `{"Status":"SUCCESS","RequestId":"r1","LogicalResourceId":"dns","StackId":"s/eu/1","PhysicalResourceId":"p1","Data":{"fqdn":"a.example"}}`
	tests := []struct {
		name       string
		method     string
		path       string
		sinkErr    error
		ctype      string
		want       int
		wantCode   string
		wantDetail string
		wantCall   *delivery
	}{
		{name: "PUT, no content type (cfn-response)", method: http.MethodPut, path: "/v1/responses/tok.abc",
			want: http.StatusOK, wantCall: &delivery{"tok.abc", cfnBody, ""}},
		{name: "POST JSON", method: http.MethodPost, path: "/v1/responses/tok.abc", ctype: "application/json",
			want: http.StatusOK, wantCall: &delivery{"tok.abc", cfnBody, "application/json"}},
		{name: "refused", method: http.MethodPut, path: "/v1/responses/bad",
			sinkErr: &statusErr{http.StatusForbidden, "stackd.bad_signature", "the response URL's signature is not valid"},
			want:    http.StatusForbidden, wantCode: "stackd.bad_signature", wantDetail: "the response URL's signature is not valid",
			wantCall: &delivery{"bad", cfnBody, ""}},
		{name: "wrapped refusal", method: http.MethodPut, path: "/v1/responses/dup",
			sinkErr: fmt.Errorf("deliver: %w", &statusErr{http.StatusConflict, "stackd.duplicate_response", "a response for r1 arrived already"}),
			want:    http.StatusConflict, wantCode: "stackd.duplicate_response", wantDetail: "a response for r1 arrived already",
			wantCall: &delivery{"dup", cfnBody, ""}},
		{name: "status without code", method: http.MethodPut, path: "/v1/responses/gone",
			sinkErr: httpStatusOnly{http.StatusGone}, want: http.StatusGone, wantCode: CodeBadRequest, wantDetail: "refused with 410",
			wantCall: &delivery{"gone", cfnBody, ""}},
		{name: "non-error status", method: http.MethodPut, path: "/v1/responses/odd",
			sinkErr: &statusErr{http.StatusOK, "", "odd"}, want: http.StatusInternalServerError, wantCode: CodeInternal,
			wantCall: &delivery{"odd", cfnBody, ""}},
		{name: "unknown error", method: http.MethodPut, path: "/v1/responses/x",
			sinkErr: errors.New("disk on fire at /secret/path"), want: http.StatusInternalServerError, wantCode: CodeInternal,
			wantDetail: "The response could not be processed; see the daemon's log.", wantCall: &delivery{"x", cfnBody, ""}},
		{name: "signal", method: http.MethodPost, path: "/v1/signals/wc.1",
			want: http.StatusOK, wantCall: &delivery{"wc.1", cfnBody, ""}},
		{name: "no GET", method: http.MethodGet, path: "/v1/responses/x", want: http.StatusMethodNotAllowed, wantCode: CodeMethodNotAllowed},
		{name: "no token", method: http.MethodPut, path: "/v1/responses/", want: http.StatusNotFound, wantCode: CodeRouteNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{err: tc.sinkErr}
			e := newEnv(t, func(o *Options) { o.Responses, o.Signals = sink, sink })
			h := map[string]string{}
			if tc.ctype != "" {
				h["Content-Type"] = tc.ctype
			}
			// No bearer token: the signed URL is the credential.
			r := e.do(req{method: tc.method, path: tc.path, body: cfnBody, header: h, noAuth: true})
			r.wantStatus(t, tc.method, tc.want)
			var want []delivery
			if tc.wantCall != nil {
				want = []delivery{*tc.wantCall}
			}
			if diff := cmp.Diff(want, sink.delivered(), cmp.AllowUnexported(delivery{})); diff != "" {
				t.Errorf("deliveries (-want +got):\n%s", diff)
			}
			if tc.want == http.StatusOK {
				return
			}
			ae := r.apiErr(t)
			if ae.Code != tc.wantCode {
				t.Errorf("code = %q, want %q", ae.Code, tc.wantCode)
			}
			if tc.wantDetail != "" && ae.Detail != tc.wantDetail {
				t.Errorf("detail = %q, want %q", ae.Detail, tc.wantDetail)
			}
		})
	}
}

// The Go client sends an empty Content-Type header when asked to; it
// reaches the sink as "".
func TestResponsesEmptyContentType(t *testing.T) {
	sink := &fakeSink{}
	e := newEnv(t, func(o *Options) { o.Responses = sink })
	hr, _ := http.NewRequest(http.MethodPut, e.srv.URL+"/v1/responses/t", strings.NewReader(`{"Status":"FAILED"}`))
	hr.Header["Content-Type"] = []string{""}
	res, err := e.srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	readResp(t, res).wantStatus(t, "PUT", http.StatusOK)
	if got := sink.delivered(); len(got) != 1 || got[0].contentType != "" || got[0].body != `{"Status":"FAILED"}` {
		t.Errorf("deliveries = %+v", got)
	}
}

func TestResponsesLimits(t *testing.T) {
	sink := &fakeSink{}
	e := newEnv(t, func(o *Options) { o.Responses, o.SignedLimits.MaxBodyBytes = sink, 4096 })
	r := e.do(req{method: http.MethodPut, path: "/v1/responses/t", body: strings.Repeat("x", 4097), noAuth: true})
	r.wantStatus(t, "oversized", http.StatusRequestEntityTooLarge)
	if len(sink.delivered()) != 0 {
		t.Errorf("an oversized body reached the sink")
	}
	e.do(req{method: http.MethodPut, path: "/v1/responses/t", body: strings.Repeat("x", 4096), noAuth: true}).
		wantStatus(t, "at the limit", http.StatusOK)
}

func TestResponsesNotConfigured(t *testing.T) {
	e := newEnv(t, nil)
	for _, path := range []string{"/v1/responses/t", "/v1/signals/t"} {
		r := e.do(req{method: http.MethodPost, path: path, body: "{}", noAuth: true})
		r.wantStatus(t, path, http.StatusNotFound)
		if got := r.apiErr(t).Code; got != CodeNotConfigured {
			t.Errorf("%s: code = %q, want %q", path, got, CodeNotConfigured)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
