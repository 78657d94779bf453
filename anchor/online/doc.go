// Package online is the online half of anchoring (the offline half, the
// records and their verification, is package anchor): a [Runner] anchors
// the latest checkpoint every interval when the tree grew by more than
// its own anchor entries, asking each authority on its own with a
// timeout (a [TSAClient] per RFC 3161 time-stamping authority, a
// [RekorClient] per Sigstore Rekor log); answers that verified are stored
// together, and failed authorities are retried with exponential backoff,
// all off the append path. [Runner.Status] reports the anchoring gap and
// each authority's last success and error. [NewHandler] serves the
// records at /log/anchors. [Config] is the anchors: section of the
// sidecar's configuration and [Config.Resolve] what it trusts.
package online
