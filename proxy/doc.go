// Package proxy is provlog's MCP front: an MCP server (stdio or streamable
// HTTP) in front of any number of downstream MCP servers, which records
// every tools/call through it as a call entry in the log (DESIGN §2, §5).
//
// [New] starts the downstream servers from [ServerConfig]s; [Proxy.Server]
// is the front server (cmd adds provlog's task tools to it);
// [Proxy.ServeStdio] and [Proxy.HTTPHandler] serve it. It is built on
// github.com/modelcontextprotocol/go-sdk v1.8.0.
//
// # Names
//
// A downstream server's tools and prompts appear as <id>__<name> (or under
// its configured prefix), with the tool schemas byte for byte as the server
// listed them. Its resources and resource templates appear with the URI
// scheme prefixed by "<id>+": "file:///a.txt" of server "docs" is
// "docs+file:///a.txt", and the template "test://{id}/data" is
// "docs+test://{id}/data". RFC 3986 allows '+' in a scheme, so these are
// still absolute URIs, templates stay templates, and the mapping is undone
// by cutting the prefix. Resource links and embedded resources in results
// get the same prefix, so clients can read them through the proxy. A
// server configured with an empty prefix keeps its names and URIs; New
// refuses to start when two such servers collide. The proxy's own tools are
// provlog__status, provlog__prove and provlog__verify: answered, never
// recorded.
//
// A tool whose definition go-sdk would reject (an input schema without
// "type":"object", bad x-mcp-header annotations) is skipped and reported
// in the log and in provlog__status, never a crash; every handler runs
// under recover.
//
// # Recording
//
// Every tools/call to a downstream server is recorded before it runs
// (DESIGN §2), in two entries appended to [Options.Log] (log.CallEntry and
// log.CallResultEntry, whose doc lists their fields):
//
//   - a "call" entry — server, tool, tool_sha256 (the definition the call
//     was made against), the redacted arguments (or their hash, with the
//     arguments kept as a blob, when the entry would be too large),
//     client, protocol_version, started — durable before anything reaches
//     the downstream. A call whose entry cannot be written is refused with
//     a JSON-RPC error and never forwarded: arguments JCS cannot represent
//     (1e999, a 100,000-digit number, duplicate keys: invalid params) or
//     would represent as another number (an integer beyond ±2^53, a
//     number other than 0 that underflows to 0: log.ExactNumbers), a
//     stopped log, a full or read-only disk (internal error, "the call
//     to … was not made").
//   - a "call.result" entry — the call entry's index, result_sha256 (of
//     the RFC 8785 form of the result exactly as received, read off the
//     wire, not the SDK's re-encoding), result_bytes, is_error, error and
//     error_code (redacted values scrubbed out), release, duration_ns —
//     durable before the client sees the outcome. The client's
//     _meta["dev.provlog/receipt"] ([ReceiptKey]) is its receipt. If it
//     cannot be written, the client gets an error saying the call was made
//     (naming its call entry) but its result is withheld.
//
// A call cut off by a crash or a kill stays in the log as a call entry
// without a call.result; log.Audit, provlog tasks and the PROV export
// show it so. Failed calls (a downstream protocol error, a crash, a
// timeout, a cancellation) are recorded too and then returned as errors;
// the error's data carries the receipt unless the downstream's own error
// data is forwarded verbatim. Every front takes the same two steps
// (startCall and settle in record.go), in the one call lifecycle below. When
// the log is a server.Sequencer, the call.result is announced when the
// call is forwarded (Expect), so that under load a commit can wait briefly
// for it and carry several entries (commit_delay).
//
// # Redaction
//
// A server's "redact" fields (in any case with redact_ignore_case) are
// replaced by "[redacted]" wherever they occur in a call's arguments, at
// any depth, before anything is hashed, logged or written; the downstream
// server still gets the real arguments. The redacted values (of four or
// more characters) are also scrubbed from recorded error texts, from a
// retained result (retain: full) that echoes them — the blob kept is then
// the scrubbed result, named by its own hash (result_retained_sha256), as
// the result's hash stays that of the result as received — and from what
// a stdio server prints on stderr, which goes to the proxy's log at debug
// level. A text there (a string or member name of the result, an error
// text, a stderr line) that holds base64 of bytes holding a redacted
// value, in one run or broken into lines (indented or not, or escaped in
// a JSON text inside it), becomes "[redacted]" whole. The proxy's own
// log lines that quote a server (why a connection was lost or a start
// failed, a refusal) are scrubbed of the redacted values of its latest
// calls, as its stderr is. The proxy never logs arguments.
//
// # Forwarding
//
// Progress is routed per call: the proxy gives the downstream a token of
// its own and sends the server's progress to the session and token that
// asked. Cancellation flows down through the SDK. Log messages go to the
// client whose call is in progress on that server, with the logger name
// prefixed by the server id; the front server filters by each client's
// level. One that cannot be tied to a call goes only to sessions of the
// one actor it can concern (the callers of that server if all are one
// actor, else with no call in progress every session if all are one
// actor's), and with two actors to no one: one actor never reads what a
// shared server logged while serving another. List-changed notifications make the proxy
// re-read that server's lists, and the front server tells its clients.
// Resource subscriptions are counted and forwarded once per URI.
// Sampling and elicitation requests from a server go to the client whose
// call caused them, on that call's own event stream (askClient, the one
// router of server requests). Those an HTTP server sends on the call's
// stream need no guessing; those a stdio server sends go to the client
// whose call is in progress on it, and with none, or calls from several
// client sessions at once, the request is refused (MCP does not say which
// call a server request belongs to).
//
// # One call lifecycle
//
// Every tools/call takes the same steps (serveCall, lifecycle.go): the
// actor, the call entry (record.go), the forwarding, the classification
// of its outcome, the call.result entry, and the result as the server
// sent it with the receipt added and front URIs (frontPrep.result). A stateful
// streamable HTTP server gets the call as one POST on the session the
// SDK's client opened (postCall, httpcall.go; over the proxy's own
// HTTP/1.1 connections for plain http, http1.go, else with net/http's
// client), its answer read off the wire, JSON or an event stream; a stdio
// server, and a server of the sessionless 2026-07-28 revision, through
// the SDK's client, with the result captured off the wire (capture.go):
// a stdio server's output the proxy reads itself, each answer with
// parseWire as an HTTP server's (stdioConn, downframe.go), and the SDK
// reads a stand-in for a call's result rather than decode it; an HTTP
// server's answers are read through under the SDK, which holds back for
// the capture an answer nested deeper than the SDK reads (httptee.go).
// The result is made ready for
// the client once (frontresult.go): the receipt spliced into the bytes
// as received unless there are URIs to rewrite.
// The fronts only frame the lifecycle's answer, and every one writes its
// bytes: the HTTP front's fast path (stateful sessions and plain
// 2026-07-28 calls) and the pipe front themselves, the SDK's front (the
// calls they do not take: progress tokens, batches, stdio at 2026-07-28)
// through serveTools, whose rawResult the SDK encodes as it is. Reads
// (resources/read, prompts/get) are made ready the same way, from the
// canonical form their entry hashed (frontReadAs), and reach the client
// so too (rawReads).
//
// # Protocol revisions
//
// A server is spoken to in the revision of the client whose request it is,
// where it speaks it (revision.go): a stdio server's 2025-11-25 session
// serves older clients, and a second session in 2026-07-28, started when
// the first such client calls, serves those; an HTTP server is asked for
// the newest. An older client's call that meets a 2026-07-28 session is
// bridged (bridge.go): the server's input_required result becomes the
// requests that client understands, on the call's stream, and the call
// goes on with the answers, each leg through the lifecycle as a call
// entry of its own that names the call.result it continues. Its
// prompts/get and resources/read are bridged the same way (readLegs,
// forward.go), each leg a prompt.get or resource.read entry of its own.
//
// # The HTTP front's fast path
//
// A plain tools/call over HTTP — one request in the POST, on an
// initialized stateful session of the caller's own actor, to a downstream
// tool of a stateful server, without a progress token — skips the SDK's
// server session (httpfront.go): the request is read in one strict pass
// (log.WalkObject, which also yields the arguments' canonical form for the
// entry; anything JCS would refuse goes to the SDK). A client of
// 2025-11-25 gets an event stream that can be resumed (SEP-1699): a
// priming event with an id and a retry field at once, then the server's
// requests during the call and the answer last, each with an id; it can
// resume the stream with a GET carrying Last-Event-ID, and the call does
// not depend on the connection. When an HTTP server closes its stream of
// a call (SSE polling), the proxy resumes it with Last-Event-ID and
// closes the client's the same way. An older client gets one
// application/json response, or an event stream without ids if the
// server asks it something (callstream.go). The client's response to a
// request is a POST the fast path hands to the waiting call. Everything
// else goes to the SDK's handler. The proxy keeps HTTP sessions' idle clock itself
// (Options.SessionIdle without a request closes a session), as the SDK's
// does not see the fast path's requests, and closes a session once the
// OAuth token its client last sent on it stops holding (sessiontoken.go).
//
// The pipe front (stdio) takes the same calls the same way
// (stdiofront.go): it reads the client's stream value by value
// (jsonframe.go), serves a plain tools/call on a line of its own through
// the lifecycle and answers it on a line of its own, and hands the SDK's
// connection every other byte as it came.
//
// # The HTTP front
//
// [Front] wraps the sidecar's whole HTTP handler: on a loopback bind every
// path refuses a non-loopback Host or Origin (403, DNS rebinding), and a
// request body must arrive within [BodyTimeout]; cmd sets
// [ReadHeaderTimeout] and [IdleTimeout] on its http.Server. One
// authenticator (package authn: static tokens and OAuth access tokens)
// reads the Authorization header of /mcp and the log API; [Proxy.HTTPHandler]
// answers /mcp's 401 and 403 challenges and refuses a call whose token
// lacks its tool group's scopes. Stateful sessions are capped ([Options.MaxSessions], 503
// beyond it) and closed after [Options.SessionIdle] without a request.
// Each actor may hold only its share of the sessions, of the parked calls
// and of the resource subscriptions ([Options.SessionsPerActor],
// [Options.ParkedPerActor], [Options.SubscriptionsPerActor]; a session
// holds at most [Options.SubscriptionsPerSession] subscriptions), so that
// one token cannot lock the other actors out (actorcap.go).
// A client that stops reading holds up only itself: what the SDK's
// handler writes to a request's event stream is queued and written by a
// goroutine of its own (streamwriter.go), progress and log notifications
// past 1 MiB queued dropped, and a client that takes nothing of a write
// for 30s, or is 32 MiB behind, given up; a downstream's answer is read to
// 16 MiB at most (an event, or a JSON body).
//
// # Downstream health
//
// A stdio server runs in its own process group. When it exits or crashes,
// its calls in flight fail with a clear error (and are recorded), and it is
// restarted with exponential backoff (250ms doubling to 30s, reset after
// 30s of good health); HTTP servers are reconnected the same way. Each call
// is bounded by the server's timeout (60s by default). Sessions are pinged
// every 30s and dropped after three failed pings, so a hung server is
// restarted too. provlog__status reports each server's state. On Linux,
// the process provlog started exiting ends the connection even if a child
// it left holds its stdout open, unless it exited before the server's
// first answer: then it was a launcher that backgrounded the server,
// which is served as long as its stdout lasts (exitWatch, dial.go).
//
// A server whose config a live reload changes is replaced without
// refusing its calls (ChangeServers, servers.go): those under way finish
// on the old instance, new ones wait for the new instance to start (up
// to the connect timeout) and go to it, under the same names.
//
// # Where a server's parts live
//
// Each configured server is a downstream (downstream.go) in three rooms:
// its supervisor (supervisor.go) keeps it connected and reports its
// state; its catalogue (catalogue.go) registers its tools, prompts,
// resources and templates at the front and keeps them in step with its
// lists, one generic sync for the four, and reads.go records the tool
// definitions it listed; its calls in progress say which client a
// server's own request or log message goes back to. The router
// (router.go) says which server a front name or URI belongs to.
package proxy
