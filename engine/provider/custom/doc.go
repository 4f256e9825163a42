// Package custom is the built-in "custom" provider: the ROS/CloudFormation
// custom resource protocol (docs/design.md §7a). A resource
//
//	resource "custom" "dns" {
//	  type          = "Custom::DNSRecord"          // a registered resource type
//	  service_token = "https://dns.internal/hook"  // optional when the type has a default
//	  properties    = { name = local.name }
//	  timeout       = "10m"                        // 1s to 12h, default 5m
//	  stringify_properties = false                 // true: numbers and bools sent as strings
//	  response_over_https  = false                 // true: answers only over https to port 443 (cfn-response)
//	}
//
// is created, updated and deleted by POSTing a JSON Request to its service
// token and waiting for a Response: either in the body of the HTTP answer
// (a JSON object with a "Status" member), or later by PUT or POST to the
// pre-signed ResponseURL, exactly as AWS's cfn-response helpers send it (any
// Content-Type, including an empty one). Responses are at most
// MaxResponseBytes (4,096) bytes. Status FAILED is a *FailedError carrying
// the service's Reason; no response within the timeout a *TimeoutError.
// Templates read the response's Data as custom.NAME.data.KEY; NoEcho makes
// the data attribute sensitive. Attributes: id (the physical id), data,
// reason.
//
// # Idempotency
//
// The RequestId is the engine's RequestID, stable across retries and
// restarts, so the service can deduplicate. Connection errors and HTTP 5xx
// or 429 answers (whatever their body) are retried with backoff
// (RetryPolicy) with the same RequestId; a response that arrives on the
// ResponseURL meanwhile ends the retrying. Other non-2xx answers are
// failures, also when their body is a SUCCESS response object; redirects
// are not followed.
// PhysicalResourceId is required (the seed): a Create answered SUCCESS
// without one fails (*MissingPhysicalIDError), after a Delete with the
// RequestId as PhysicalResourceId cleaned up what the service made; an
// Update answered without one keeps the physical id it named, with a
// warning (CloudFormation's leniency). A Delete of a resource without
// physical id (a resumed create) is still sent, with the RequestId as
// PhysicalResourceId. An Update
// answered with a different PhysicalResourceId is a replacement: the old
// physical id then gets a Delete whose RequestId is DeleteOldRequestID of
// the Update's, so a resumed Update deduplicates it too.
//
// # Responses that cannot arrive
//
// Options.NoAPI says that nothing serves the response URLs (stackd apply
// without --listen): planning logs a warning once per resource type, and a
// request the service only acknowledges fails at once (*UnreachableError)
// rather than at its timeout. A resource whose service answers only over
// https to port 443, as AWS's Node.js cfn-response module does whatever
// the ResponseURL says, sets response_over_https = true: planning then
// rejects it unless an API is served and the external URL is https on
// port 443.
//
// # Response URLs
//
// The Broker signs and verifies response URLs and hands each response to
// the call waiting for it. A URL is ExternalURL + ResponsesPath + token,
//
//	token   = base64url(payload) "." base64url(HMAC-SHA256(key, "stackd/v1/responses\x00" || payload))
//	payload = 0x01, then RequestId, StackId and LogicalResourceId, each
//	          uvarint-length-prefixed, then the expiry as int64 big-endian
//	          Unix seconds
//
// (base64url without padding). The expiry is the end of the call's timeout.
// The HTTP API routes PUT|POST ResponsesPath+"{token}" to Broker.Deliver,
// reading at most MaxResponseBytes+1 bytes of the body, and answers a
// refusal with the *DeliveryError's Status and Code (see Deliver for the
// table). A refused delivery changes nothing; a waiter that gave up or was
// answered is remembered until its URL expires, so late and repeated
// responses get 410 and 409. The key should be kept across restarts so a
// resumed call still accepts a response to a URL sent before the restart
// (its waiter is keyed by RequestId).
//
// Replicas sharing a state (docs/design.md §13) share the key, and each
// broker has a Forwarder: a verified response that no waiter of this
// process awaits is recorded with it (the daemon writes a row to the state
// and wakes the other replicas), and the replica whose call awaits it takes
// it (Broker.Forwarded, or when Await starts).
//
// # Secrets
//
// Values of properties and Data are never logged nor put into errors; a
// service token is named by scheme and host only, as its path or query may
// hold a secret.
//
// This package imports engine/provider and the standard library (plus
// go-cty, google/uuid and zerolog); it must not import the engine, state or
// the HTTP API, which import it.
package custom
